"""meat_off_grill on both embedded backends, and its descriptions as upstream's."""

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

from rlbench_vec.backends.mujoco import BACKEND

TASK = "meat_off_grill"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/meat_off_grill.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "take the chicken off the grill",
        "pick up the chicken and place it next to the grill",
        "remove the chicken from the grill and set it down to the side",
    ],
    1: [
        "take the steak off the grill",
        "pick up the steak and place it next to the grill",
        "remove the steak from the grill and set it down to the side",
    ],
}


def test_meat_off_grill_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_meat_off_grill_on_mujoco():
    check_mujoco(TASK, variations=2, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_meat_off_grill_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's base yaw: the fork's meat_off_grill.py has no base_rotation_bounds, so Task's default +-3.14.
def test_meat_off_grill_placement_is_upstreams():
    check_placement(TASK, (YawRange("grill", -3.14, 3.14),), config(TASK))


# An evaluate episode drew this layout before the reset's check solved the straight moves' pieces as the oracle
# executes them: the check passed, and the oracle's second action (down to the chicken, 21 cm in front of the
# base) had no IK solution from the arm's real state.
def test_meat_off_grill_reset_keeps_a_layout_the_oracle_executes_for_seed_509417625():
    backend = BACKEND(config(TASK, arm_mode="ik", backend_options={"variation": 0}), 0)
    try:
        backend.reset(509417625, None)
        results = [backend.sim.act(action) for action in backend.sim.oracle_actions()]
    finally:
        backend.close()
    assert not any(result.info.get("invalid_action") for result in results), results[-1].info
    assert results[-1].terminated and results[-1].reward == 1.0
