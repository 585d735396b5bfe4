"""KLUE fine-tuning suite: the KLUE metrics (:mod:`.metrics`), readers of the official task formats
(:mod:`.data`), KLUE-baseline's hyperparameter presets (:mod:`.presets`), one-task fine-tuning
(:func:`.run.finetune`), several tasks with one table (:func:`.suite.evaluate`) and the KLUE-ordered
results table (:mod:`.report`)."""
