"""RLBench's success vocabulary on both embedded backends: the mujoco backend's Python evaluator and
the mjwarp backend's batched kernel give the same answers on the same states (warp's CPU device).

One scene with a block, a second block, a zone carrying a sphere and a box region, a slider joint and
the Panda; random states, some with the block held between the fingers. Every condition kind (and
the sets) is evaluated in every state over three consecutive states, so ordered sets carry progress.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
from conftest import needs

from rlbench_vec.backends.mujoco.scene import ARTICULATED, HOME_QPOS, Scene, axis_angle_quat, geom
from rlbench_vec.backends.mujoco.tasks.conditions import (
    TCP,
    ConditionSet,
    DetectedCondition,
    GraspedCondition,
    JointCondition,
    NothingGrasped,
    OrConditions,
    check_condition,
)
from rlbench_vec.backends.mujoco.tasks.objects import free_box, mocap_body, region

CONDITIONS = [
    DetectedCondition("block", "sphere_zone"),
    DetectedCondition("block", "box_zone", negated=True),
    DetectedCondition(TCP, "sphere_zone"),
    JointCondition("slider", 0.01),
    GraspedCondition("block"),
    NothingGrasped(),
    ConditionSet([GraspedCondition("block"), DetectedCondition("block", "box_zone")]),
    ConditionSet([JointCondition("slider", 0.01), DetectedCondition("block", "sphere_zone")], order_matters=True),
    OrConditions([DetectedCondition("other", "sphere_zone"), JointCondition("slider", 0.01)]),
]
STATES_PER_CONDITION, STEPS = 8, 3


def scene_model():
    scene = Scene((8, 8))
    free_box(scene.worldbody, "block", (0.025,) * 3)
    free_box(scene.worldbody, "other", (0.02,) * 3)
    zone = mocap_body(scene.worldbody, "zone")
    region(zone, "sphere_zone", radius=0.05)
    region(zone, "box_zone", half_size=(0.06, 0.03, 0.02))
    rail = mocap_body(scene.worldbody, "rail", (0.3, 0.45, 0.8))
    slider = ET.SubElement(rail, "body", name="slider")
    ET.SubElement(slider, "joint", name="slider", type="slide", axis="1 0 0", range="-0.05 0.05")
    geom(slider, "box", (0.5, 0.5, 0.5, 1), ARTICULATED, size=(0.02, 0.02, 0.02))
    return mujoco.MjModel.from_xml_string(scene.to_xml())


def draw_state(world, data, rng: np.random.Generator) -> None:
    """A random state: the arm near home, the zone near the tool or away, the block held or loose."""
    for i, q in enumerate(HOME_QPOS + rng.uniform(-0.2, 0.2, 7), start=1):
        world.set_joint(f"panda_joint{i}", q)
    world.set_joint("slider", rng.choice([0.0, 0.02, -0.03]))
    mujoco.mj_forward(world.model, data)
    tcp, tcp_quat = world.tcp_pose()
    near_tool = rng.random() < 0.5
    zone = tcp + rng.uniform(-0.06, 0.06, 3) if near_tool else np.array([0.3, -0.3, 0.9]) + rng.uniform(-0.1, 0.1, 3)
    world.set_pose("zone", zone, axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
    held = near_tool and rng.random() < 0.6
    fingers = 0.022 if held else 0.04  # closed 1 mm into a 5 cm block, or open
    world.set_joint("panda_finger_joint1", fingers)
    world.set_joint("panda_finger_joint2", fingers)
    block = tcp if held else zone + rng.uniform(-0.07, 0.07, 3)
    if not held and np.linalg.norm(block - tcp) < 0.15:
        block = zone + [0.0, 0.0, 0.2]  # clear of the hand: only a held block touches the pads
    world.set_pose("block", block, tcp_quat if held else axis_angle_quat((0, 0, 1), rng.uniform(-1, 1)))
    world.set_pose("other", zone + rng.uniform(-0.08, 0.08, 3) + [0.0, 0.0, 0.3 * near_tool])
    mujoco.mj_forward(world.model, data)


def test_ordered_sets_inside_lazy_conditions_are_refused():
    ordered = ConditionSet([NothingGrasped()], order_matters=True)
    with pytest.raises(ValueError, match="keeps progress"):
        check_condition(OrConditions([ordered, NothingGrasped()]))
    with pytest.raises(ValueError, match="keeps progress"):
        check_condition(ConditionSet([ordered], order_matters=True))
    assert check_condition(ConditionSet([ordered, NothingGrasped()])) is not None


@needs("gpu", "warp", "mujoco_warp")
def test_python_and_batched_conditions_agree():
    import mujoco_warp as mjw
    import warp as wp

    from rlbench_vec.backends.mjwarp.conditions import BatchedConditions
    from rlbench_vec.backends.mujoco.success import SuccessEvaluator
    from rlbench_vec.backends.mujoco.world import World

    device = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")
    model = scene_model()
    data = mujoco.MjData(model)
    world = World(model, data)
    worlds = len(CONDITIONS) * STATES_PER_CONDITION
    variation = np.arange(worlds) % len(CONDITIONS)  # world w evaluates condition w % 9
    rng = np.random.default_rng(4)
    states = []  # per step: qpos, mocap_pos, mocap_quat of every world
    for _ in range(STEPS):
        rows = []
        for _ in range(worlds):
            draw_state(world, data, rng)
            rows.append((data.qpos.copy(), data.mocap_pos.copy(), data.mocap_quat.copy()))
        states.append([np.stack(column) for column in zip(*rows)])

    evaluators = [SuccessEvaluator(World(model, mujoco.MjData(model))) for _ in range(worlds)]
    expected = np.zeros((STEPS, worlds), int)
    for step, (qpos, mocap_pos, mocap_quat) in enumerate(states):
        for w, evaluator in enumerate(evaluators):
            d = evaluator.world.data
            d.qpos[:], d.mocap_pos[:], d.mocap_quat[:] = qpos[w], mocap_pos[w], mocap_quat[w]
            mujoco.mj_forward(model, d)
            if step == 0:
                evaluator.start(CONDITIONS[variation[w]])
            expected[step, w] = evaluator.met()

    wp.init()
    with wp.ScopedDevice(device):
        m = mjw.put_model(model)
        d = mjw.put_data(model, data, nworld=worlds, nconmax=64, njmax=256)
        conditions = BatchedConditions(model, CONDITIONS, worlds, device)
        start = wp.array(states[0][0].astype(np.float32), dtype=float)
        variations = wp.array(variation.astype(np.int32), dtype=int)
        out = wp.zeros(worlds, dtype=int)
        got = np.zeros_like(expected)
        for step, (qpos, mocap_pos, mocap_quat) in enumerate(states):
            d.qpos.assign(qpos.astype(np.float32))
            d.mocap_pos.assign(mocap_pos.astype(np.float32))
            d.mocap_quat.assign(mocap_quat.astype(np.float32))
            mjw.forward(m, d)
            conditions.evaluate(d, start, variations, out)
            got[step] = out.numpy()

    for c, condition in enumerate(CONDITIONS):
        mine = expected[:, variation == c]
        assert 0 < mine.sum() < mine.size, f"the states never make {condition} both true and false"
        np.testing.assert_array_equal(got[:, variation == c], mine, err_msg=str(condition))


# (block centre from the zone's, zone yaw) -> (block detected by sphere_zone, by box_zone); the block is
# a 5 cm cube, sphere_zone a 5 cm sphere, box_zone half (6, 3, 2) cm about the zone's axes.
PART_INSIDE = [
    ((0.06, 0.0, 0.0), 0.0, (True, True)),  # centre outside the sphere, its near face inside
    ((0.08, 0.0, 0.0), 0.0, (False, True)),
    ((0.058, 0.058, 0.0), 0.0, (True, False)),  # an edge inside the sphere
    ((0.0, 0.05, 0.0), 0.0, (True, True)),  # centre outside the box, a face inside
    ((0.0, 0.06, 0.0), 0.0, (True, False)),
    ((0.0, 0.09, 0.0), 0.0, (False, False)),
    ((0.08, 0.0, 0.04), 0.0, (False, True)),  # an edge inside the box
    ((0.0, 0.08, 0.0), math.pi / 2, (False, True)),  # the box turned: its long axis along y
    ((0.06, 0.0, 0.0), math.pi / 2, (True, False)),
]


@needs("gpu", "warp", "mujoco_warp")
def test_an_object_is_detected_when_part_of_it_is_inside_the_region():
    """RLBench's sensors detect any part of a shape: a block whose centre is outside a region but part of
    it inside is detected, on both evaluators; one wholly outside is not."""
    import mujoco_warp as mjw
    import warp as wp

    from rlbench_vec.backends.mjwarp.conditions import BatchedConditions
    from rlbench_vec.backends.mujoco.success import SuccessEvaluator
    from rlbench_vec.backends.mujoco.world import World

    conditions = [DetectedCondition("block", "sphere_zone"), DetectedCondition("block", "box_zone")]
    model = scene_model()
    zone = np.array([0.3, -0.3, 0.9])
    states, expected = [], []
    for offset, yaw, detected in PART_INSIDE:
        data = mujoco.MjData(model)
        world = World(model, data)
        world.set_pose("zone", zone, axis_angle_quat((0, 0, 1), yaw))
        world.set_pose("block", zone + offset, np.array([1.0, 0.0, 0.0, 0.0]))
        mujoco.mj_forward(model, data)
        evaluator = SuccessEvaluator(world)
        for condition, want in zip(conditions, detected):
            evaluator.start(condition)
            assert evaluator.met() == want, (offset, yaw, condition)
            states.append((data.qpos.copy(), data.mocap_pos.copy(), data.mocap_quat.copy()))
            expected.append(want)

    device = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")
    worlds = len(states)
    wp.init()
    with wp.ScopedDevice(device):
        qpos, mocap_pos, mocap_quat = (np.stack(column).astype(np.float32) for column in zip(*states))
        m = mjw.put_model(model)
        d = mjw.put_data(model, mujoco.MjData(model), nworld=worlds, nconmax=64, njmax=256)
        d.qpos.assign(qpos)
        d.mocap_pos.assign(mocap_pos)
        d.mocap_quat.assign(mocap_quat)
        mjw.forward(m, d)
        batched = BatchedConditions(model, conditions, worlds, device)
        out = wp.zeros(worlds, dtype=int)
        variations = wp.array((np.arange(worlds) % 2).astype(np.int32), dtype=int)
        batched.evaluate(d, wp.array(qpos, dtype=float), variations, out)
    np.testing.assert_array_equal(out.numpy(), np.array(expected, int))
