"""KLUE fine-tuning suite (placeholder: replaced by the fine-tuning stage)."""
