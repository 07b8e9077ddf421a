"""BatchedSimulation: every world of one embedded task in one MuJoCo Warp simulator on one device.

Actions go in as one (num_worlds, action_size) array; rewards, flags and observations come out as
torch tensors on the device sharing memory with the simulator (DLPack), overwritten by the next call.
Every launch sequence is a captured graph (CUDA graphs on a GPU, warp's recorded launches on the CPU).
A step: begin the action, control steps (rlbench timing: while any world still moves, the host reading
three counters after each; fixed timing: one), then finish (forward, rewards, flags; restoring faulted
worlds). A world whose action is done is frozen while the others finish theirs (timing.py). No Python
loop over worlds, except where a reset draws new episodes on the host (episodes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from ...config import EnvConfig
from ...errors import ActionError, ConfigError
from ...spec import action_size
from ..mujoco.robot import CONTROL_DT
from ..mujoco.simulation import Simulation
from . import check_config
from .control import begin_joint_position, begin_joint_velocity, begin_pose, control_substep, make_arm, make_controller
from .episodes import EpisodeStarts, Options
from .faults import count_contacts, detect_faults
from .kinematics import chain_frames
from .observation import Observer
from .outputs import ChunkOutput, StepOutput
from .profile import CONDITIONS, CONTROLLERS, FORWARD, PHYSICS, RESET_DEVICE, RESET_DRAW, PhaseTimer, phase
from .sequences import Pieces, Sequences
from .tasks import BatchedTask
from .timing import clear_motion, count_phases, end_control_step, end_fixed_step, finish_action, keep_frozen

FROZEN_STATE = ("time", "qpos", "qvel", "act", "qacc_warmstart", "overflow")  # what keep_frozen puts back


class BatchedSimulation:
    """`num_worlds` copies of the embedded mujoco backend's env (`config`: task, cameras, modalities,
    low_dim, action mode) on one warp device ("cuda:0", "cpu", None: warp's preferred device).

    nconmax: contact slots per world (pooled over all worlds); njmax: constraint rows per world.
    deterministic: MuJoCo Warp's deterministic execution (stable contact and constraint order, invariant
    atomics), so that on a GPU too a world's trajectory is bit-for-bit its own (warp's CPU device runs
    in order anyway). capture: replay captured graphs (else launch every kernel from Python each call:
    for debugging). profile: time each phase (`profile.PhaseTimer`, read with `phase_totals()`); each
    phase is then a graph of its own. Call reset() before the first step."""

    def __init__(self, config: EnvConfig, num_worlds: int, device: str | None = None, *, nconmax: int = 64,
                 njmax: int = 256, deterministic: bool = False, capture: bool = True, profile: bool = False):
        if not isinstance(num_worlds, int) or num_worlds < 1:
            raise ConfigError(f"num_worlds must be an integer >= 1, got {num_worlds!r}.")
        self.config = replace(config, backend="mujoco").validated()
        check_config(self.config)
        self.num_worlds = num_worlds
        self.fixed = self.config.action_timing == "fixed"
        self.action_size = action_size(self.config)
        wp.init()
        self.device = wp.get_device(device)
        self.torch_device = wp.device_to_torch(self.device)
        self.stream = self.device.stream if self.device.is_cuda else None
        self._torch_stream = wp.stream_to_torch(self.stream) if self.stream is not None else None

        host = Simulation(replace(self.config, cameras=(), video_cameras=()))
        host.reset(0, np.random.default_rng(0))  # a valid state to size the device data with
        self.host = host
        with wp.ScopedDevice(self.device):
            self.m = mjw.put_model(host.model, batch_sizes={"geom_rgba": num_worlds})
            self.m.opt.warn_overflow = 0  # overflows are reported per world as faults
            self.m.opt.deterministic = bool(deterministic)
            self.d = mjw.put_data(host.model, host.data, nworld=num_worlds, nconmax=nconmax, njmax=njmax)
        self.nconmax = nconmax
        self.substeps = round(CONTROL_DT / host.model.opt.timestep)
        self.arm = make_arm(host.panda, chain_frames(host.model, host.data), self.device)
        self.controller = make_controller(num_worlds, self.device)
        self.episodes = EpisodeStarts(self.config, host, num_worlds, self.device, self.m.geom_rgba)
        self.task = BatchedTask(host, self.episodes, num_worlds, self.device, self.m.geom_rgba)
        self.observer = Observer(self.config, host.model, self.m, self.d, self.arm, self.task, self.device)
        self.spec = self.observer.spec  # per-world layout: rlbench_vec.spec.observation_spec of the mujoco backend

        zeros = self._zeros
        self._actions, self._active = zeros((num_worlds, self.action_size), wp.float32), zeros(num_worlds, wp.int32)
        self._contacts, self._success = zeros(num_worlds, wp.int32), zeros(num_worlds, wp.int32)
        self._reset_mask, self._restore_mask = zeros(num_worlds, wp.bool), zeros(num_worlds, wp.bool)
        self._pending_resets = np.zeros(num_worlds, bool)  # drawn by a deferred reset, not yet on the device
        # [worlds in an action, worlds with a fault, worlds done and not yet reported], read after each launch
        self._status = zeros(3, wp.int32)
        self._status_host = wp.zeros(3, dtype=wp.int32, device="cpu", pinned=self.device.is_cuda)
        self._saved = {name: wp.empty_like(getattr(self.d, name)) for name in FROZEN_STATE}
        self._in_flight = np.zeros(num_worlds, bool)  # worlds left in their action by step(min_done=...)
        results = {"reward": wp.float32, "terminated": wp.bool, "truncated": wp.bool, "fault": wp.int32,
                   "error": wp.int32, "control_steps": wp.int32, "moving": wp.int32, "finished": wp.bool}
        self._results = {name: zeros(num_worlds, dtype) for name, dtype in results.items()}
        self._actions_t, self._active_t = wp.to_torch(self._actions), wp.to_torch(self._active)
        self.output = StepOutput(**{name: wp.to_torch(array) for name, array in self._results.items()})
        self.observations = {key: wp.to_torch(array) for key, array in self.observer.arrays.items()}

        self.profile = PhaseTimer(self.device) if profile else None
        finish: Pieces = [(FORWARD, self._forward), (CONDITIONS, self._conditions)]
        self._sequences = Sequences({
            "reset": [(RESET_DEVICE, self._reset_sequence)], "begin": [(CONTROLLERS, self._begin_sequence)],
            "control": [(PHYSICS, self._physics), (CONTROLLERS, self._control_checks)], "finish": finish,
            "finish_restore": [*finish, (RESET_DEVICE, self._restore_faulted)], "observe": self.observer.pieces()},
            self.device, self.stream, self.profile)
        self._warm_up()
        if capture:
            self._sequences.capture()
        self.phase_totals()  # profiling starts here: not the warm-up's uncaptured launches
        self.episodes.rngs = [np.random.default_rng(world) for world in range(num_worlds)]

    def _zeros(self, shape, dtype) -> wp.array:
        return wp.zeros(shape, dtype=dtype, device=self.device)

    def _warm_up(self) -> None:
        """Run every sequence once without a graph, so each kernel is compiled and loaded before capture:
        a reset of all worlds, an action that keeps every arm where it is (delta targets of zero), an
        observation."""
        self.reset()
        hold = np.zeros((self.num_worlds, self.action_size), np.float32)
        if self.config.arm_mode == "ik":
            hold[:, 6] = 1.0  # identity rotation (x, y, z, w)
        hold[:, -1] = 1.0 if self.config.gripper_mode == "discrete" else 0.04
        self._actions_t.copy_(torch.from_numpy(hold))
        self._active_t.fill_(1)
        with wp.ScopedDevice(self.device):
            self._begin_sequence(absolute=0)
        self._sequences.run_uncaptured(("control", "finish_restore", "observe"))
        wp.synchronize_device(self.device)

    # --- the launch sequences (each captured in a graph) -------------------------------------------
    # A control step runs MuJoCo Warp's step, which allocates scratch memory; CUDA forbids allocations
    # inside conditional graph nodes, so the loop over control steps runs on the host: one small
    # device-to-host copy of `status` per control step, for all worlds at once.

    def _reset_sequence(self) -> None:
        self._restore_starts(self._reset_mask)

    def _restore_starts(self, mask: wp.array) -> None:
        """The masked worlds back to their episode start, nothing under way."""
        mjw.reset_data(self.m, self.d, mask)
        self.episodes.restore(mask, self.arm, self.controller, self.d)
        self.task.restart(mask)
        wp.launch(clear_motion, dim=self.num_worlds, device=self.device, inputs=[mask, self.controller])
        mjw.forward(self.m, self.d)

    def _begin_sequence(self, absolute: int | None = None) -> None:
        c, d, n = self.config, self.d, self.num_worlds
        absolute = int(c.absolute_mode) if absolute is None else absolute
        common = [self.arm, self.controller, self._actions, self._active, d.qpos, d.qvel,
                  int(c.gripper_mode == "discrete"), int(self.fixed)]
        if c.arm_mode == "joint_velocity":
            wp.launch(begin_joint_velocity, dim=n, inputs=common, device=self.device)
        elif c.arm_mode == "joint_position":
            wp.launch(begin_joint_position, dim=n, inputs=[*common, absolute], device=self.device)
        else:
            wp.launch(begin_pose, dim=n, device=self.device, inputs=[*common, absolute, d.site_xpos, d.site_xmat])
        self._status.zero_()
        wp.launch(count_phases, dim=n, inputs=[self.controller, self._status], device=self.device)
        wp.copy(self._status_host, self._status)

    def _physics(self) -> None:
        """A control step's physics for every world: the servo setpoints and one physics step per
        substep (the state saved first, for the frozen worlds)."""
        d, n, saved = self.d, self.num_worlds, self._saved
        velocity_mode = int(self.config.arm_mode == "joint_velocity")
        dt = float(self.host.model.opt.timestep)
        for name in FROZEN_STATE:
            wp.copy(saved[name], getattr(d, name))
        for _ in range(self.substeps):
            wp.launch(control_substep, dim=n, device=self.device,
                      inputs=[self.arm, self.controller, velocity_mode, dt, d.ctrl])
            mjw.step(self.m, d)

    def _control_checks(self) -> None:
        """After a control step's physics: the worlds whose action was done before it are put back as
        they were (frozen); then fault checks and phase changes."""
        d, n, saved = self.d, self.num_worlds, self._saved
        wp.launch(keep_frozen, dim=n, device=self.device, inputs=[
            self.controller, *(getattr(d, name) for name in FROZEN_STATE), *(saved[name] for name in FROZEN_STATE)])
        self._contacts.zero_()
        wp.launch(count_contacts, dim=d.naconmax, device=self.device,
                  inputs=[d.nacon, d.contact.worldid, self._contacts])
        wp.launch(detect_faults, dim=n, device=self.device,
                  inputs=[d.qpos, d.qvel, d.overflow, self._contacts, self.nconmax, self.controller.fault])
        self._status.zero_()
        if self.fixed:  # joint_position and ik run towards a goal: say whether they reached it
            wp.launch(end_fixed_step, dim=n, device=self.device, inputs=[
                self.arm, self.controller, int(self.config.arm_mode != "joint_velocity"), d.qpos, d.qvel, self._status])
        else:
            wp.launch(end_control_step, dim=n, device=self.device, inputs=[
                self.arm, self.controller, int(self.config.arm_mode == "ik"), d.qpos, d.qvel, self._status])
        wp.copy(self._status_host, self._status)

    def _forward(self) -> None:
        mjw.forward(self.m, self.d)

    def _conditions(self) -> None:
        d, r = self.d, self._results
        self.task.success(d, self._success)
        wp.launch(finish_action, dim=self.num_worlds, device=self.device, inputs=[
            self.controller, self._success, r["reward"], r["terminated"], r["truncated"], r["fault"], r["error"],
            r["control_steps"], r["moving"], r["finished"], self._restore_mask])
        self.task.shape_rewards(d, r)

    def _restore_faulted(self) -> None:
        """After the conditions: the faulted worlds go back to their episode start."""
        self._restore_starts(self._restore_mask)

    # --- public API --------------------------------------------------------------------------------

    def reset(self, mask: Any = None, seeds: Sequence[int | None] | None = None,
              options: Options = None, defer: bool = False) -> dict[int, dict]:
        """Start new episodes in the masked worlds (bool (num_worlds,) numpy/torch/list; None: all).

        seeds: None or one per world (None entries keep that world's generator); world i draws its
        episodes like env i of the mujoco backend. options: one mapping for all, or one per world
        ({"variation": v}). Returns {world: {"descriptions", "variation_index"}} for the reset worlds.
        The draw happens on the host. defer: only draw; the worlds take their new episode starts on the
        device at the next observe(), or at the next step() that moves one of them (apply_resets), so
        many resets cost one launch."""
        worlds = self._worlds(mask)
        if worlds.size == 0:
            return {}
        self._synchronize()  # the staging buffers may still be read by the previous upload
        with phase(self.profile, RESET_DRAW, None):
            infos = self.episodes.draw(worlds, seeds, options)
        self._pending_resets[worlds] = True
        if not defer:
            self.apply_resets()
        return infos

    def apply_resets(self) -> None:
        """Put the episode starts drawn by deferred resets into their worlds (one upload, one launch)."""
        if not self._pending_resets.any():
            return
        self._reset_mask.assign(self._pending_resets)
        self._pending_resets[:] = False
        self._torch_before_warp()
        with phase(self.profile, RESET_DEVICE, self.stream):
            self.episodes.upload(self.stream)
        self._launch("reset", read=False)
        self._warp_before_torch()

    def step(self, actions: Any, active: Any = None, min_done: int | None = None,
             control_steps: int | None = None) -> StepOutput:
        """One action per world (num_worlds, action_size), numpy or torch on any device; only the
        `active` worlds (bool (num_worlds,); None: all) take theirs. Returns `output` (overwritten by
        the next step): `finished` marks the worlds whose action is done, reported once.

        rlbench timing: control steps repeat until every world in an action is done (one host read of
        three counters per control step); a world done early is frozen meanwhile. min_done: return as
        soon as that many worlds are done (counting those done at once), leaving the others in their
        action: the next step() carries them on while new actions (for worlds not in one) join.
        control_steps: at most that many control steps (the worker takes new actions in between).
        fixed timing: one control step for every active world."""
        self._set_actions(actions)
        flags = np.ones(self.num_worlds, bool) if active is None else self._host_flags(active)
        if flags.shape != (self.num_worlds,):
            raise ConfigError(f"active must hold {self.num_worlds} booleans, got shape {flags.shape}.")
        if (flags & self._in_flight).any():
            raise ActionError(f"worlds {np.flatnonzero(flags & self._in_flight).tolist()} are still in their "
                              "previous action: give them a new one after a step reports them finished.")
        self._active_t.copy_(torch.from_numpy(flags.astype(np.int32)).to(self.torch_device))
        if (self._pending_resets & flags).any():
            self.apply_resets()  # a world about to move must start from its new episode
        self._torch_before_warp()
        moving, faulted, done = self._launch("begin")
        if self.fixed:
            if moving:
                moving, faulted, done = self._launch("control")
        else:
            taken = 0
            while moving and (min_done is None or done < min_done) and (control_steps is None or taken < control_steps):
                moving, faulted, done = self._launch("control")
                taken += 1
        self._launch("finish_restore" if faulted else "finish", read=False)
        self._warp_before_torch()
        if moving or self._in_flight.any():
            self._in_flight = (self._in_flight | flags) & ~self.output.finished.cpu().numpy()
        return self.output

    def step_chunk(self, actions: Any) -> ChunkOutput:
        """K actions per world (num_worlds, K, action_size) in one call: K steps whose results stay on
        the device; a world stops at its episode's end (terminated or truncated) and holds still after."""
        chunk = torch.as_tensor(actions, dtype=torch.float32, device=self.torch_device)
        if chunk.ndim != 3 or chunk.shape[0] != self.num_worlds or chunk.shape[2] != self.action_size:
            raise ActionError(f"step_chunk expects actions of shape ({self.num_worlds}, K, {self.action_size}), "
                              f"got {tuple(chunk.shape)}.")
        n, k = self.num_worlds, chunk.shape[1]
        out = {name: torch.zeros((n, k), dtype=t.dtype, device=self.torch_device)
               for name, t in vars(self.output).items() if name not in ("control_steps", "finished")}
        executed = torch.zeros((n, k), dtype=torch.bool, device=self.torch_device)
        done = torch.zeros(n, dtype=torch.bool, device=self.torch_device)
        for i in range(k):
            executed[:, i] = ~done
            result = self.step(chunk[:, i], active=~done)
            for name, tensor in out.items():
                tensor[:, i] = getattr(result, name)
            done |= result.terminated | result.truncated
        return ChunkOutput(executed=executed, **out)

    def observe(self) -> dict[str, torch.Tensor]:
        """Every observation key of the layout (rlbench_vec.spec.observation_spec), (num_worlds, ...)
        tensors on the device in RLBench's dtypes; the same tensors every call, overwritten each time."""
        self.apply_resets()
        self._torch_before_warp()
        self._launch("observe", read=False)
        self._warp_before_torch()
        return dict(self.observations)

    def observe_numpy(self) -> dict[str, np.ndarray]:
        """observe(), copied to host numpy arrays: one device-to-host copy of every image (on a GPU this
        costs more than rendering them; see docs/mjwarp.md)."""
        return {key: tensor.cpu().numpy() for key, tensor in self.observe().items()}

    @property
    def variations(self) -> np.ndarray:
        """Each world's current task variation."""
        return self.episodes.host_view["variation"].copy()

    def phase_totals(self) -> dict[str, float]:
        """Seconds per phase since the last call (profile=True; else empty)."""
        return {} if self.profile is None else self.profile.take()

    def close(self) -> None:
        self._sequences.drop()

    # --- helpers -----------------------------------------------------------------------------------

    def _worlds(self, mask: Any) -> np.ndarray:
        if mask is None:
            return np.arange(self.num_worlds)
        flags = self._host_flags(mask)
        if flags.shape != (self.num_worlds,):
            raise ConfigError(f"reset mask must hold {self.num_worlds} booleans, got shape {flags.shape}.")
        return np.flatnonzero(flags)

    @staticmethod
    def _host_flags(mask: Any) -> np.ndarray:
        if isinstance(mask, np.ndarray):
            return mask.astype(bool, copy=False).reshape(-1)
        return torch.as_tensor(mask).detach().cpu().numpy().astype(bool).reshape(-1)

    def _set_actions(self, actions: Any) -> None:
        tensor = torch.as_tensor(actions, dtype=torch.float32, device=self.torch_device)
        if tuple(tensor.shape) != (self.num_worlds, self.action_size):
            raise ActionError(f"expected actions of shape ({self.num_worlds}, {self.action_size}), "
                              f"got {tuple(tensor.shape)}.")
        self._actions_t.copy_(tensor)

    def _launch(self, name: str, read: bool = True) -> tuple[int, int, int]:
        """Replay a sequence's graph on the warp stream (or run it, without capture); with `read`, wait
        for it and return the status counters (worlds in an action, worlds faulted, worlds done and
        not yet reported)."""
        self._sequences.launch(name)
        if not read:
            return 0, 0, 0
        self._synchronize()
        moving, faulted, done = self._status_host.numpy()
        return int(moving), int(faulted), int(done)

    def _torch_before_warp(self) -> None:
        """Warp's stream waits for what torch queued (the actions copied in)."""
        if self.stream is not None:
            self.stream.wait_stream(wp.stream_from_torch(torch.cuda.current_stream(self.torch_device)))

    def _warp_before_torch(self) -> None:
        """Torch's stream waits for warp's results before it reads them."""
        if self._torch_stream is not None:
            torch.cuda.current_stream(self.torch_device).wait_stream(self._torch_stream)

    def _synchronize(self) -> None:
        if self.stream is not None:
            wp.synchronize_stream(self.stream)
