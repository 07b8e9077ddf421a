"""The worker side: what runs in each spawned worker process.

`main` opens the worker's display (if its backend needs one), only then imports its backend and
starts its simulators, and answers the main process's commands; `runner` runs a command over the
worker's group of envs (steps with autoreset, resets, calls), `batched_runner` does so for a batched
GPU simulator whose worlds finish at their own pace; `delivery` writes results into the shared pages;
`video` records per-env mp4s off the step's critical path.

May import: the package's base modules (errors, config, distributed, spec, `backends`), `wire`,
`display`. Never the engine (`engine`), the front or `cli`.
"""
