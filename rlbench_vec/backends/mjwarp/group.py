"""MjwarpGroup: the envs of a vector env as the worlds of one BatchedSimulation, in one worker.

Instance i is world i. A step moves the commanded worlds together, each on its own clock (a world
whose action is done, or that has none, is frozen: see docs/mjwarp.md); resets are drawn on the
host at once and reach the device with the next observation in one launch; observations are
rendered once per state and copied, one copy per key, into the result page's slots. On a GPU the
two result pages are CUDA tensors made here and shared once with the main process (device_pages),
so a step's observations never leave the GPU; on warp's CPU device they go into the shared-memory
block like any backend's.

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

if "mujoco" not in sys.modules:
    os.environ["MUJOCO_GL"] = "disable"  # the worlds render with MuJoCo Warp: MuJoCo itself needs no GL here

import torch  # noqa: E402
import warp  # noqa: E402

warp.config.log_level = warp.LOG_WARNING  # no line per kernel module loaded at each worker start

from .simulation import BatchedSimulation  # noqa: E402

DEMOS_ALTERNATIVE = (
    "the mjwarp backend collects no demos: collect them with backend='mujoco' (the same scene, tasks, cameras and "
    "observation layout; an episode reset with the same seed starts the same way), e.g. "
    "RLBenchVectorEnv(num_envs, task, backend='mujoco', ...).get_demos(amount)."
)
READABLE = ("variation", "config", "task")  # what get_attr reads per env
CALLABLE = ("render_rgb", "phase_profile")


class MjwarpGroup(EnvGroup):
    """Every env of the vector env, as worlds 0..size-1 of one simulator on backend_options' device."""

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
        options = config.backend_options
        self.sim = BatchedSimulation(self._rendered(config), self.size, device_of(config),
                                     nconmax=options.get("nconmax", 64), njmax=options.get("njmax", 256),
                                     deterministic=bool(options.get("deterministic", False)),
                                     profile=bool(options.get("profile", False)))
        self.device = torch.device(self.sim.torch_device)
        # the page writes run on torch's stream: profiled there
        self._page_stream = warp.stream_from_torch(torch.cuda.current_stream(self.device)) \
            if self.sim.profile is not None and self.device.type == "cuda" else None
        self._observations: dict[str, torch.Tensor] | None = None  # None: the state changed since the last render
        self._actions = np.zeros((self.size, self.sim.action_size), np.float32)
        self._starting = np.zeros(self.size, bool)  # worlds given an action since the last advance
        self._everyone = np.arange(self.size)
        self._tensor_views: dict[int, tuple[Mapping, dict[str, torch.Tensor]]] = {}
        self._page_tensors: list[torch.Tensor] = []  # the result pages shared with the main process

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
        """Draw new episodes on the host; the worlds take them at the next observation (one launch for
        every reset since). A failing draw fails its own world only."""
        worlds = local.tolist()
        all_seeds: list[int | None] = [None] * self.size
        all_options: list[Mapping[str, Any] | None] = [None] * self.size
        for world, seed, world_options in zip(worlds, seeds, options):
            all_seeds[world], all_options[world] = seed, world_options
        self._observations = None
        mask = np.zeros(self.size, bool)
        mask[local] = True
        try:
            infos = self.sim.reset(mask, all_seeds, all_options, defer=True)
        except Exception:
            return [self._reset_world(world, all_seeds, all_options) for world in worlds]
        return [infos[world] for world in worlds]

    def _reset_world(self, world: int, seeds: list, options: list) -> dict[str, Any] | tuple[str, str]:
        mask = np.zeros(self.size, bool)
        mask[world] = True
        try:
            return self.sim.reset(mask, seeds, options, defer=True)[world]
        except Exception as error:
            return failure(error)

    def step(self, local, actions):
        """Every commanded world's action, run until it is done in its world (each world on its own clock)."""
        self.start(local, actions)
        finished, result = self.advance(None)
        if not np.array_equal(finished, local):  # results come in world order; the engine's local may not be
            order = np.searchsorted(finished, local)
            result = GroupStep(result.reward[order], result.terminated[order],
                               {j: result.infos[i] for j, i in enumerate(order.tolist()) if i in result.infos},
                               {}, result.seconds, None if result.truncated is None else result.truncated[order])
        return result

    def start(self, local, actions):
        self._actions[local] = actions
        self._starting[local] = True

    def advance(self, min_done, control_steps=None):
        start = time.perf_counter()
        out = self.sim.step(self._actions, active=self._starting, min_done=min_done, control_steps=control_steps)
        self._starting[:] = False
        self._observations = None
        # one device-to-host copy for every world's results
        reward, terminated, fault, error, moving, finished = torch.stack([
            out.reward, out.terminated.float(), out.fault.float(), out.error.float(), out.moving.float(),
            out.finished.float()]).cpu().numpy()
        done = np.flatnonzero(finished)
        bits, codes, motion = (values[done].astype(np.int32) for values in (fault, error, moving))
        result = GroupStep(reward[done].astype(np.float64), terminated[done] > 0, {}, {}, truncated=bits != 0)
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
        result.seconds = time.perf_counter() - start
        return done, result

    # ------------------------------------------------------------------ observations
    def _current(self) -> dict[str, torch.Tensor]:
        """Every world's observation of the current state, rendered once per state."""
        if self._observations is None:
            self._observations = self.sim.observe()
        return self._observations

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
            source = self._current()
            target = self._as_tensors(views)
            with phase(self.sim.profile, PAGE_WRITE, self._page_stream):
                self._write(local, slots, source, target)
            if self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()  # written before the reply says so
        except Exception as error:
            return {j: failure(error) for j in range(len(local))}
        return {}

    def _write(self, local: np.ndarray, slots: np.ndarray, source: Mapping[str, torch.Tensor],
               target: Mapping[str, torch.Tensor]) -> None:
        """Worlds `local`'s observations into the page's rows `slots`: one copy per key."""
        if len(local) == self.size and np.array_equal(local, self._everyone) and np.array_equal(slots, local):
            for key in self.layout:
                target[key][:self.size].copy_(source[key])
        else:
            worlds = torch.from_numpy(local.astype(np.int64)).to(self.device)
            rows = torch.from_numpy(slots.astype(np.int64)).to(self.device)
            for key in self.layout:
                target[key].index_copy_(0, rows, source[key].index_select(0, worlds))

    def write_one(self, local, out):
        source = self._current()
        for key, array in out.items():
            torch.from_numpy(array).copy_(source[key][local])

    def device_pages(self, layout, rows, max_chunk, every_step):
        if self.device.type != "cuda":
            return None

        def tensor(shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
            made = torch.zeros(shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, device=self.device)
            self._page_tensors.append(made)
            return made

        def page() -> dict[str, dict[str, torch.Tensor]]:
            made = {"obs": {key: tensor((rows, *s.shape), s.dtype) for key, s in layout.items()}}
            if every_step:
                made["chunk"] = {key: tensor((rows, max_chunk, *s.shape), s.dtype) for key, s in layout.items()}
            return made

        return [page(), page()]

    # ------------------------------------------------------------------ calls
    def render_rgb(self, local: int, camera: str) -> np.ndarray:
        """World `local`'s current rgb frame of `camera`, from the render its observation comes from."""
        frame = self._current().get(f"{camera}_rgb")
        if frame is None:
            raise ConfigError(
                f"the mjwarp backend renders {camera!r} in rgb only when it is observed: add it to cameras with "
                "'rgb' in modalities (or record video of it: record=VideoConfig(cameras=...)), or use "
                "backend='mujoco', which renders any camera on request.")
        return frame[local].to("cpu", copy=True).numpy()  # the frame outlives the next render (video queues it)

    def phase_profile(self) -> dict[str, float]:
        """Seconds per phase of the simulator's work for all worlds since the last call (profile.py);
        the worlds share it, so any env's call answers for all."""
        if self.sim.profile is None:
            raise ConfigError("phase_profile needs the phases timed: backend_options={'profile': True} "
                              "(the bench's --profile).")
        return self.sim.phase_totals()

    def call(self, local, name, args, kwargs):
        if name == "render_rgb":
            return self.render_rgb(local, *args, **kwargs)
        if name == "phase_profile":
            return self.phase_profile()
        if name == "get_demos":
            raise NotImplementedError(DEMOS_ALTERNATIVE)
        if name == "variation":
            return int(self.sim.variations[local])
        if name == "config":
            return self.config
        if name == "task":
            return self.config.task
        if name == "__setattr__":
            raise AttributeError("the mjwarp backend's envs have no settable attributes: per-env choices go "
                                 "through reset(options={'env_options': [...]}) (e.g. {'variation': v}).")
        raise AttributeError(f"the mjwarp backend's envs have no attribute {name!r}; readable: "
                             f"{', '.join(READABLE)}; callable: {', '.join(CALLABLE)}.")

    def close(self) -> None:
        self._observations = None
        self._tensor_views.clear()
        self.sim.close()
        if self._page_tensors:
            # Free the pages now, not at interpreter exit: torch's CUDA IPC counts every page the main
            # process was sent, and warns at exit about any still allocated. The main process let go of
            # them before asking workers to close (its users hold aliases only: rlbench_vec/tensors.py).
            for page in self._page_tensors:
                page.set_(torch.empty(0, dtype=page.dtype, device=page.device).untyped_storage())  # for all holders
            self._page_tensors.clear()
            torch.cuda.ipc_collect()
