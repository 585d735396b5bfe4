"""Upload an exported model folder to the Hugging Face Hub.

The token is never a command-line argument or config value: ``huggingface_hub`` reads it from the
``HF_TOKEN`` environment variable or the local HF cache (``hf auth login``). ``kplm_record.json`` stays
local: it holds this machine's paths. ``dry_run`` lists what would be uploaded and contacts nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kplm.errors import KplmError

LOCAL_ONLY = {"kplm_record.json"}


def upload_plan(folder: Path) -> list[str]:
    """The files of ``folder`` that an upload sends, relative and sorted."""
    files = sorted(
        p.relative_to(folder).as_posix()
        for p in Path(folder).rglob("*")
        if p.is_file() and p.name not in LOCAL_ONLY
    )
    if "model.safetensors" not in files and not any(f.startswith("model-") for f in files):
        raise KplmError(f"{folder}: no model.safetensors here; export the model before pushing it")
    return files


def push_to_hub(
    folder: Path, repo_id: str, *, private: bool, dry_run: bool, api: Any = None
) -> dict[str, Any]:
    """Create ``repo_id`` if needed and upload the folder in one commit; returns what was (or would be) sent."""
    files = upload_plan(Path(folder))
    plan = {"repo_id": repo_id, "private": private, "files": files, "dry_run": dry_run}
    if dry_run:
        return plan
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    try:
        url = api.create_repo(repo_id=repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="model",
            allow_patterns=files,
            commit_message="Upload Korean masked LM exported by kplm",
        )
    except Exception as e:  # network, auth and permission errors all end the command the same way
        raise KplmError(
            f"push to {repo_id} failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        ) from None
    return dict(plan, repo_url=str(url), commit=str(getattr(commit, "oid", commit)))
