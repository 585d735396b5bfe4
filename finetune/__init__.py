"""KLUE fine-tuning suite: the KLUE metrics (:mod:`.metrics`), readers of the official task formats
(:mod:`.data`), KLUE-baseline's hyperparameter presets (:mod:`.presets`), one-task fine-tuning
(:func:`.run.finetune`, dispatching to :mod:`.task_cls`, :mod:`.task_re`, :mod:`.task_dp`, :mod:`.task_mrc`
and :mod:`.task_wos` over the shared loop of :mod:`.loop`; custom heads saved by :mod:`.heads`), several
tasks with one table (:func:`.suite.evaluate`) and the KLUE-ordered results table (:mod:`.report`)."""
