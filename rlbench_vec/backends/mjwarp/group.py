"""MjwarpGroup: the envs of a vector env as the worlds of one BatchedSimulation per task, in one worker.

With one task, instance i is world i. With several, the envs of task t are the worlds of simulator t
(task_worlds.py), each simulator with its own kernels, graphs and clocks; a command's envs are split
between the simulators it touches, each stepped or observed in turn, and their observations land in
the same pages at each env's own index. A step moves the commanded worlds together, each on its own clock (a world
whose action is done, or that has none, is frozen: see docs/mjwarp.md); resets are drawn on the
host at once and reach the device with the next observation in one launch; observations are
rendered once per state and copied, one copy per key, into the result page's slots. On a GPU the
two result pages are CUDA tensors made here and shared once with the main process (device_pages),
so a step's observations never leave the GPU; on warp's CPU device they go into the shared-memory
block like any backend's. A step the worker observes next is rendered as soon as the worlds are done,
while the host takes in their results; the page writes are queued and the reply goes at once, the
main process's stream waiting for them on an interprocess CUDA event (pages_written).

Imported in the worker only: it imports torch, warp, mujoco_warp and mujoco.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...config import EnvConfig
from ...errors import ConfigError
from ...spec import observation_spec
from ..base import EnvGroup, GroupStep, failure
from . import device_of
from .control import ARM_MOVING, ERROR_MESSAGES, GRIPPER_MOVING
from .faults import fault_names
from .profile import PAGE_WRITE, phase
from .task_worlds import TaskWorlds, simulator_config

if "mujoco" not in sys.modules:
    os.environ["MUJOCO_GL"] = "disable"  # the worlds render with MuJoCo Warp: MuJoCo itself needs no GL here

import torch  # noqa: E402
import warp  # noqa: E402

warp.config.log_level = warp.LOG_WARNING  # no line per kernel module loaded at each worker start

from .oracles import WorldOracles  # noqa: E402
from .simulation import BatchedSimulation  # noqa: E402

DEMOS_ALTERNATIVE = (
    "the mjwarp backend collects no demos: collect them with backend='mujoco' (the same scene, tasks, cameras and "
    "observation layout; an episode reset with the same seed starts the same way), e.g. "
    "RLBenchVectorEnv(num_envs, task, backend='mujoco', ...).get_demos(amount)."
)
READABLE = ("variation", "config", "task")  # what get_attr reads per env
CALLABLE = ("render_rgb", "phase_profile")


class MjwarpGroup(EnvGroup):
    """Every env of the vector env, as the worlds of one simulator per task on backend_options' device.
    Env i's generator is seeded like the mujoco backend's env i (whatever its world)."""

    partial_steps = True  # rlbench timing: worlds finish their actions at different control steps

    def __init__(self, config: EnvConfig, instances: Sequence[int]):
        if tuple(instances) != tuple(range(len(instances))):
            raise ConfigError(
                "the mjwarp backend serves all envs from one simulator in one worker, so it takes no spare or "
                "recycled instances (a reset is a host draw of well under a millisecond): set spare_envs=0 and "
                "leave recycle_after_episodes and max_worker_rss_mb unset.")
        self.size = len(instances)
        self.config = config
        self.layout = observation_spec(config)
        self.worlds = TaskWorlds([config.task_of(env) for env in range(self.size)])
        options = config.backend_options
        self.sims: list[BatchedSimulation] = []
        self._tensor_views: dict[int, tuple[Mapping, dict[str, torch.Tensor]]] = {}
        self._page_tensors: list[torch.Tensor] = []  # the result pages shared with the main process
        try:
            for task, envs in zip(self.worlds.names, self.worlds.envs):
                sim = BatchedSimulation(self._rendered(simulator_config(config, task)), len(envs), device_of(config),
                                        nconmax=options.get("nconmax", 64), njmax=options.get("njmax", 256),
                                        deterministic=bool(options.get("deterministic", False)),
                                        profile=bool(options.get("profile", False)))
                sim.episodes.rngs = [np.random.default_rng(env) for env in envs.tolist()]  # the mujoco backend's env i
                self.sims.append(sim)
        except BaseException:
            self.close()
            raise
        self.device = torch.device(self.sims[0].torch_device)
        # the page writes run on torch's stream: profiled there, in the first simulator's timer
        self._page_stream = warp.stream_from_torch(torch.cuda.current_stream(self.device)) \
            if self.sims[0].profile is not None and self.device.type == "cuda" else None
        # per simulator, its observations of the current state; None: the state changed since the last render
        self._observations: list[dict[str, torch.Tensor] | None] = [None] * len(self.sims)
        self._actions = np.zeros((self.size, self.sims[0].action_size), np.float32)
        self._starting = np.zeros(self.size, bool)  # envs given an action since the last advance
        self._in_action = np.zeros(self.size, bool)  # envs started and not yet reported done
        self._everyone = np.arange(self.size)
        # per simulator, its step results on the host (pinned on a GPU: copied without blocking)
        self._results_host = [torch.zeros((6, sim.num_worlds), pin_memory=self.device.type == "cuda")
                              for sim in self.sims]
        self._written: torch.cuda.Event | None = None  # recorded after the page writes (device pages only)
        self.oracles = WorldOracles() if options.get("oracle") else None  # each env acts its episode's oracle
        self._exhausted: list[int] = []  # envs started whose oracle had no action left, reported at the next advance

    @property
    def sim(self) -> BatchedSimulation:
        """The simulator of a group of one task."""
        if len(self.sims) != 1:
            raise AttributeError(f"this group runs {len(self.sims)} simulators, one per task: use sims")
        return self.sims[0]

    @staticmethod
    def _rendered(config: EnvConfig) -> EnvConfig:
        """The observation config plus the rgb of the video cameras (frames come from the renders)."""
        if not config.video_cameras:
            return config
        cameras = config.cameras + tuple(c for c in config.video_cameras if c not in config.cameras)
        modalities = config.modalities if "rgb" in config.modalities else config.modalities + ("rgb",)
        return replace(config, cameras=cameras, modalities=modalities)

    # ------------------------------------------------------------------ episodes
    def reset(self, local, seeds, options):
        """Draw new episodes on the host; the worlds take them at the next observation (one launch per
        simulator for every reset since). A failing draw fails its own world only."""
        infos: list[dict[str, Any] | tuple[str, str]] = [{} for _ in range(len(local))]
        for t, positions, worlds in self.worlds.split(local):
            sim = self.sims[t]
            all_seeds: list[int | None] = [None] * sim.num_worlds
            all_options: list[Mapping[str, Any] | None] = [None] * sim.num_worlds
            for p, world in zip(positions.tolist(), worlds.tolist()):
                all_seeds[world], all_options[world] = seeds[p], options[p]
            self._observations[t] = None
            self._in_action[local[positions]] = False  # a new episode has nothing under way
            envs = local[positions]
            try:
                drawn = self._draw(sim, envs, worlds, all_seeds, all_options)
                found = [drawn[world] for world in worlds.tolist()]
            except Exception:
                found = [self._draw_one(sim, env, world, all_seeds, all_options)
                         for env, world in zip(envs.tolist(), worlds.tolist())]
            for p, info in zip(positions.tolist(), found):
                infos[p] = info
        return infos

    def _draw(self, sim: BatchedSimulation, envs: np.ndarray, worlds: np.ndarray, seeds: list,
              options: list) -> dict[int, dict[str, Any]]:
        """New episodes of these worlds (deferred), with their oracles when the envs act them."""
        if self.oracles is not None:
            return self.oracles.reset(sim, envs, worlds, seeds, options)
        mask = np.zeros(sim.num_worlds, bool)
        mask[worlds] = True
        return sim.reset(mask, seeds, options, defer=True)

    def _draw_one(self, sim: BatchedSimulation, env: int, world: int, seeds: list,
                  options: list) -> dict[str, Any] | tuple[str, str]:
        try:
            return self._draw(sim, np.array([env]), np.array([world]), seeds, options)[world]
        except Exception as error:
            return failure(error)

    def step(self, local, actions, observed=True):
        """Every commanded world's action, run until it is done in its world (each world on its own clock).
        observed: each simulator renders as soon as its worlds are done, while the host takes in their results."""
        self.start(local, actions)
        finished, result = self.advance(None, render=observed)
        if not np.array_equal(finished, local):  # results come in env order; the engine's local may not be
            order = np.searchsorted(finished, local)
            result = GroupStep(result.reward[order], result.terminated[order],
                               {j: result.infos[i] for j, i in enumerate(order.tolist()) if i in result.infos},
                               {}, result.seconds, None if result.truncated is None else result.truncated[order])
        return result

    def start(self, local, actions):
        if self.oracles is not None:  # the actions given are replaced by the oracles'
            actions = np.array(actions, np.float32)
            exhausted = np.zeros(len(local), bool)
            for t, positions, worlds in self.worlds.split(local):
                planned = actions[positions]
                exhausted[positions] = self.oracles.act(self.sims[t], local[positions], worlds, planned)
                actions[positions] = planned
            self._exhausted += local[exhausted].tolist()
            local, actions = local[~exhausted], actions[~exhausted]
        self._actions[local] = actions
        self._starting[local] = True
        self._in_action[local] = True

    def advance(self, min_done, control_steps=None, render=False):
        """One simulator: its own step. Several: each simulator with envs in an action steps in turn, all
        to the end of their actions (min_done and control_steps None), else one control step each per
        round until min_done envs are done or control_steps rounds ran. render: each simulator renders as
        soon as its step is done, while the host takes in its results (step()'s observed)."""
        start = time.perf_counter()
        busy = [t for t, envs in enumerate(self.worlds.envs) if self._in_action[envs].any()]
        exhausted = np.array(self._exhausted, np.int64)
        self._exhausted = []
        rounds, parts = 0, [self._oracle_exhausted(exhausted)] if exhausted.size else []
        single = len(self.sims) == 1 or (min_done is None and control_steps is None)  # one call per simulator
        while busy:
            for t in busy:
                parts.append(self._step_simulator(t, min_done if single else None,
                                                  control_steps if single else 1, render))
            rounds += 1
            done = sum(len(part[0]) for part in parts)
            busy = [t for t in busy if self._in_action[self.worlds.envs[t]].any()]
            if single or (min_done is not None and done >= min_done) or (control_steps is not None
                                                                           and rounds >= control_steps):
                break
        done, result = self._results(parts, time.perf_counter() - start)
        for j in np.flatnonzero(np.isin(done, exhausted)).tolist():
            result.infos.setdefault(j, {})["oracle_exhausted"] = True
        return done, result

    @staticmethod
    def _oracle_exhausted(envs: np.ndarray) -> tuple[np.ndarray, ...]:
        """The results of envs whose oracle ran out of actions: the episode ends unsolved, as on mujoco."""
        zeros = np.zeros(len(envs))
        return envs, zeros, np.ones(len(envs)), zeros, zeros, zeros

    def _step_simulator(self, t: int, min_done: int | None, control_steps: int | None,
                        render: bool) -> tuple[np.ndarray, ...]:
        """One step of simulator t; its envs done, and their reward, terminated, fault bits, error codes
        and motion bits (one device-to-host copy)."""
        envs = self.worlds.envs[t]
        out = self.sims[t].step(self._actions[envs], active=self._starting[envs], min_done=min_done,
                                control_steps=control_steps)
        self._starting[envs] = False
        self._observations[t] = None
        results = self._results_host[t]
        results.copy_(torch.stack([out.reward, out.terminated.float(), out.fault.float(), out.error.float(),
                                   out.moving.float(), out.finished.float()]), non_blocking=True)
        copied = torch.cuda.Event() if self.device.type == "cuda" else None
        if copied is not None:
            copied.record()
        if render:
            self._render_early(t)
        if copied is not None:
            copied.synchronize()  # the results only: the render goes on on the device
        reward, terminated, fault, error, moving, finished = results.numpy()
        done = np.flatnonzero(finished)
        self._in_action[envs[done]] = False
        return envs[done], reward[done], terminated[done], fault[done], error[done], moving[done]

    @staticmethod
    def _results(parts: list[tuple[np.ndarray, ...]], seconds: float) -> tuple[np.ndarray, GroupStep]:
        """The envs done in these simulator steps, ascending, and their results."""
        if not parts:
            return np.zeros(0, np.int64), GroupStep(np.zeros(0), np.zeros(0, bool), {}, {}, seconds, np.zeros(0, bool))
        envs, reward, terminated, fault, error, moving = (np.concatenate(column) for column in zip(*parts))
        order = np.argsort(envs, kind="stable")
        done = envs[order]
        bits, codes, motion = (values[order].astype(np.int32) for values in (fault, error, moving))
        result = GroupStep(reward[order].astype(np.float64), terminated[order] > 0, {}, {}, truncated=bits != 0)
        for j in np.flatnonzero(bits | codes | motion).tolist():
            info = result.infos[j] = {}
            if bits[j]:
                info["fault"] = ",".join(fault_names(int(bits[j])))
            if codes[j]:
                info["error"] = f"InvalidActionError: {ERROR_MESSAGES[int(codes[j])]}"
                info["invalid_action"] = True
            if motion[j] & ARM_MOVING:  # fixed timing: what is still under way
                info["arm_moving"] = True
            if motion[j] & GRIPPER_MOVING:
                info["gripper_moving"] = True
        result.seconds = seconds
        return done, result

    # ------------------------------------------------------------------ observations
    def _render_early(self, t: int) -> None:
        """Launch simulator t's render of the state just stepped, for the observation that follows."""
        try:
            self._current(t)
        except Exception:  # observe() renders again and reports the failure per env
            self._observations[t] = None

    def _current(self, t: int) -> dict[str, torch.Tensor]:
        """Every world's observation of simulator t's current state, rendered once per state."""
        observations = self._observations[t]
        if observations is None:
            observations = self._observations[t] = self.sims[t].observe()
        return observations

    def _as_tensors(self, views: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """A page's views as tensors: the device pages themselves, or tensors over the shared block's
        numpy views (made once per views dict: the runner keeps its dicts)."""
        cached = self._tensor_views.get(id(views))
        if cached is None or cached[0] is not views:
            tensors = {key: view if isinstance(view, torch.Tensor) else torch.from_numpy(view)
                       for key, view in views.items()}
            cached = self._tensor_views[id(views)] = (views, tensors)
        return cached[1]

    def observe(self, local, views, slots):
        try:
            target = self._as_tensors(views)
            # rendered first: a render is a phase of its own, not part of the page write
            parts = [(self._current(t), positions, worlds) for t, positions, worlds in self.worlds.split(local)]
            with phase(self.sims[0].profile, PAGE_WRITE, self._page_stream):
                if (len(self.sims) == 1 and len(local) == self.size and np.array_equal(local, self._everyone)
                        and np.array_equal(slots, local)):
                    for key in self.layout:
                        target[key][:self.size].copy_(parts[0][0][key])
                else:
                    for source, positions, worlds in parts:
                        picked = torch.from_numpy(worlds).to(self.device)
                        rows = torch.from_numpy(slots[positions].astype(np.int64)).to(self.device)
                        for key in self.layout:
                            target[key].index_copy_(0, rows, source[key].index_select(0, picked))
            if self._written is not None:  # the reply goes at once: the main process's stream waits for this
                self._written.record(torch.cuda.current_stream(self.device))
        except Exception as error:
            return {j: failure(error) for j in range(len(local))}
        return {}

    def write_one(self, local, out):
        source = self._current(int(self.worlds.sim_of[local]))
        world = int(self.worlds.world_of[local])
        for key, array in out.items():
            torch.from_numpy(array).copy_(source[key][world])

    def device_pages(self, layout, rows, max_chunk, every_step):
        if self.device.type != "cuda":
            return None

        def tensor(shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
            made = torch.zeros(shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, device=self.device)
            self._page_tensors.append(made)
            return made

        self._written = torch.cuda.Event(interprocess=True)

        def page() -> dict[str, dict[str, torch.Tensor]]:
            made = {"obs": {key: tensor((rows, *s.shape), s.dtype) for key, s in layout.items()}}
            if every_step:
                made["chunk"] = {key: tensor((rows, max_chunk, *s.shape), s.dtype) for key, s in layout.items()}
            return made

        return [page(), page()]

    def pages_written(self):
        return None if self._written is None else self._written.ipc_handle()

    # ------------------------------------------------------------------ calls
    def render_rgb(self, local: int, camera: str) -> np.ndarray:
        """World `local`'s current rgb frame of `camera`, from the render its observation comes from."""
        frame = self._current(int(self.worlds.sim_of[local])).get(f"{camera}_rgb")
        if frame is None:
            raise ConfigError(
                f"the mjwarp backend renders {camera!r} in rgb only when it is observed: add it to cameras with "
                "'rgb' in modalities (or record video of it: record=VideoConfig(cameras=...)), or use "
                "backend='mujoco', which renders any camera on request.")
        # a copy: the frame outlives the next render (video queues it)
        return frame[int(self.worlds.world_of[local])].to("cpu", copy=True).numpy()

    def phase_profile(self) -> dict[str, float]:
        """Seconds per phase of the simulators' work for all worlds since the last call (profile.py), summed
        over the tasks' simulators; the worlds share it, so any env's call answers for all."""
        if self.sims[0].profile is None:
            raise ConfigError("phase_profile needs the phases timed: backend_options={'profile': True} "
                              "(the bench's --profile).")
        totals: dict[str, float] = {}
        for sim in self.sims:
            for name, seconds in sim.phase_totals().items():
                totals[name] = totals.get(name, 0.0) + seconds
        return totals

    def call(self, local, name, args, kwargs):
        if name == "render_rgb":
            return self.render_rgb(local, *args, **kwargs)
        if name == "phase_profile":
            return self.phase_profile()
        if name == "get_demos":
            raise NotImplementedError(DEMOS_ALTERNATIVE)
        if name == "variation":
            return int(self.sims[int(self.worlds.sim_of[local])].variations[self.worlds.world_of[local]])
        if name == "config":
            return self.config
        if name == "task":
            return self.worlds.tasks[local]
        if name == "__setattr__":
            raise AttributeError("the mjwarp backend's envs have no settable attributes: per-env choices go "
                                 "through reset(options={'env_options': [...]}) (e.g. {'variation': v}).")
        raise AttributeError(f"the mjwarp backend's envs have no attribute {name!r}; readable: "
                             f"{', '.join(READABLE)}; callable: {', '.join(CALLABLE)}.")

    def close(self) -> None:
        self._observations = [None] * len(self.sims)
        self._tensor_views.clear()
        for sim in self.sims:
            sim.close()
        if self._page_tensors:
            # Free the pages now, not at interpreter exit: torch's CUDA IPC counts every page the main
            # process was sent, and warns at exit about any still allocated. The main process let go of
            # them before asking workers to close (its users hold aliases only: rlbench_vec/tensors.py).
            for page in self._page_tensors:
                page.set_(torch.empty(0, dtype=page.dtype, device=page.device).untyped_storage())  # for all holders
            self._page_tensors.clear()
            torch.cuda.ipc_collect()
