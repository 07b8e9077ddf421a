"""Score a policy on tasks x episodes with many envs: the command line of `python -m rlbench_vec.evaluate [flags]`
(the function: evaluate(EvaluateConfig(...)), rlbench_vec.cli.evaluate_run).

    python -m rlbench_vec.evaluate --policy oracle --tasks peract18 --episodes 25 --num_envs 16 --backend mujoco \\
        --out DIR

- Episodes: episode k of task t always gets the same variation and reset seed, whatever --num_envs and whichever
  env runs it, so a deterministic policy scores the same at 1 env and at 16.
- Running: one vector env for all tasks, each env running one episode at a time, as partial batches: an env
  whose episode ended starts the next pending one at once, so a slow task holds no other.
- Outcomes: success is the episode ending with reward > 0; a time limit (--max_steps), an invalid action (the
  robot's, or a policy's NaN or inf) or a backend error end it too, recorded with the reason and counted as
  failures. A policy that raises, or returns anything but (envs, action size) numbers, stops the run (a
  programming error is no score). A worker crash mid-episode reruns that episode, never counted twice.
- PerAct's protocol: --protocol peract (four cameras, rgb and point clouds at 128x128, planning to absolute poses
  with PerAct's 9-number action, 25 steps, 25 episodes of PerAct's 18 tasks); --episodes_from DIR scores a
  dataset's stored episodes (PerAct's test set on rlbench; collect's on every backend); --repeats N (RVT: 5).
  A factory may return a YARR Agent (act(step, observation, deterministic), reset()): docs/evaluate.md.
- Output: DIR/log.jsonl, what is scored then a record per finished episode as it ends; DIR/results.json (per
  task success rate and Wilson 95% interval, mean, counts over every run of DIR) and DIR/results.md, the table
  also printed, both derived from the log (--report_only rebuilds them). A rerun with the same --out runs only
  the episodes not in the log; a folder started with other arguments, another policy file or another version is
  refused, naming what differs.
- torchrun (`torchrun --nproc_per_node N -m rlbench_vec.evaluate ...`): the episodes split between the ranks, each
  with --num_envs envs on its share of the host's cores and GPUs and its own log in DIR; rank 0 reports.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..backends import list_tasks
from ..config import ARM_MODES, BACKENDS, CAMERAS, GRIPPER_MODES, MODALITIES
from ..distributed import RankInfo
from . import ArgumentParser, add_ignore_collisions_flag, json_object, non_negative, positive
from .evaluate_config import PROTOCOLS, EvaluateConfig
from .evaluate_folder import LOG_FILE, rebuild
from .evaluate_report import markdown
from .evaluate_run import evaluate
from .runs import parsed_flags, run_stoppable

__all__ = ["EvaluateConfig", "evaluate", "main", "parse_args"]


def parse_args(argv: Sequence[str] | None = None) -> tuple[EvaluateConfig, bool]:
    """The config the flags give, and whether --report_only was given. --protocol NAME makes PROTOCOLS[NAME] the
    defaults of the flags it sets; flags given override them."""
    parser = _parser()
    chosen, _ = parser.parse_known_args(argv)
    if chosen.protocol is not None:
        parser.set_defaults(**{name: _as_flag(value) for name, value in PROTOCOLS[chosen.protocol].items()})
    args = parsed_flags(parser, argv, ("tasks", "cameras", "modalities", "image_size", "variations"))
    report_only = args.pop("report_only")
    args.pop("protocol")
    return EvaluateConfig(**args), report_only


def _as_flag(value: Any) -> Any:
    """A config value as its flag parses it: a tuple as a list, a bool as 0 or 1."""
    return list(value) if isinstance(value, tuple) else int(value) if isinstance(value, bool) else value


def _protocol_help(name: str) -> str:
    return " ".join(f"--{flag} {' '.join(map(str, value)) if isinstance(value, list) else value}"
                    for flag, value in ((flag, _as_flag(v)) for flag, v in PROTOCOLS[name].items()))


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m rlbench_vec.evaluate", description=__doc__)
    default = EvaluateConfig()
    parser.add_argument("--protocol", default=None, choices=tuple(PROTOCOLS),
                        help=f"a paper's settings as the defaults of their flags: peract: {_protocol_help('peract')}")
    parser.add_argument("--policy", default=default.policy,
                        help="oracle, keyframes (mujoco: the keyframes of each episode's oracle demo), random, "
                             "FILE.py:NAME "
                             "or package.module:NAME (a factory: docs/evaluate.md)")
    parser.add_argument("--policy_args", type=json_object, default={},
                        help="JSON object: the factory's keyword arguments (scored), e.g. "
                             "'{\"checkpoint\": \"model.pt\"}'")
    parser.add_argument("--episodes_from", default=None, metavar="DIR",
                        help="score the stored episodes of a dataset in RLBench's layout (each its variation and "
                             "start; --episodes caps how many per task)")
    parser.add_argument("--repeats", type=positive, default=default.repeats,
                        help="the whole evaluation N times over the same episodes, each with its own seeds")
    add_ignore_collisions_flag(parser)
    parser.add_argument("--tasks", nargs="+", default=list(default.tasks), metavar="TASK",
                        help="task names or a suite (peract18); the embedded backends run "
                             f"{' '.join(list_tasks('mujoco'))}")
    parser.add_argument("--episodes", type=positive, default=default.episodes, help="per task")
    parser.add_argument("--variations", type=non_negative, nargs="+", default=None,
                        help="the variations episodes cycle through (default: all of the task's)")
    parser.add_argument("--out", required=True, help="results folder (a rerun resumes it)")
    parser.add_argument("--seed", type=int, default=default.seed)
    parser.add_argument("--num_envs", type=positive, default=default.num_envs)
    parser.add_argument("--backend", default=default.backend, choices=BACKENDS)
    parser.add_argument("--video", type=non_negative, default=default.video,
                        help="record the first N episodes of each task (front camera, mp4)")
    parser.add_argument("--arm_mode", default=default.arm_mode, choices=ARM_MODES,
                        help="keyframe agents: planning or ik with --absolute_mode 1")
    parser.add_argument("--absolute_mode", type=int, default=1, choices=(0, 1))
    parser.add_argument("--gripper_mode", default=default.gripper_mode, choices=GRIPPER_MODES)
    parser.add_argument("--max_steps", type=positive, default=default.max_steps,
                        help="actions per episode (PerAct's keyframe agents: 25)")
    parser.add_argument("--image_size", type=positive, nargs=2, default=default.image_size, metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(default.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=list(default.modalities), choices=MODALITIES)
    parser.add_argument("--backend_options", type=json_object, default={}, help="JSON object")
    parser.add_argument("--renderer", default=None, help="mujoco: osmesa, egl or glfw")
    parser.add_argument("--progress", type=int, default=1, choices=(0, 1))
    parser.add_argument("--report_only", action="store_true",
                        help="run nothing: rebuild results.json and results.md of --out from its log")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    config, report_only = parse_args(argv)
    if report_only:
        result = rebuild(config.out)
    else:
        stopped = run_stoppable(evaluate, config, "rlbench_vec.evaluate", argv, "the finished episodes are kept; ",
                                Path(config.out) / LOG_FILE)
        if isinstance(stopped, int):
            return stopped
        result = stopped
    if RankInfo.from_env().rank != 0:  # under torchrun rank 0 reports the world's results
        return 0
    print(markdown(result), end="")
    log = Path(config.out) / LOG_FILE
    if result["invalid_actions"]:
        print(f"{result['invalid_actions']} episodes ended as invalid actions (counted as failures; the reasons: "
              f"{log})")
    if result["backend_errors"]:
        print(f"{result['backend_errors']} episodes ended by a backend error (counted as failures; the errors: {log})")
    return 0


