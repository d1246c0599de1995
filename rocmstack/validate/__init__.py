"""``rocmstack validate``: the post-build gate (doctor, GRPO smoke, rollout bench inside the image) and
``rocmstack publish``, which pushes only what passed. In-process API::

    from rocmstack.validate.pipeline import ValidateOptions, run_in_place
    report = run_in_place(ValidateOptions(report_dir=Path("out")))   # report["passed"] is the verdict

Modules: ``container`` (engine commands, least-privilege flags), ``pipeline`` (the in-place run),
``report`` (report.json / .md / .html), ``publish`` (the gate in front of the push).
"""
