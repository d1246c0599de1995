"""The folder a job's PYTHONPATH starts with (rocmstack.gpu.worker_masks.job_env): its ``sitecustomize``
records what GPUs each Python process of the job sees. Nothing else may live here: every module in this
folder is importable by its bare name in every process of the job."""
