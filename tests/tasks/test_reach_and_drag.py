"""reach_and_drag on both embedded backends, and its descriptions as upstream's."""

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "reach_and_drag"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/reach_and_drag.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "use the stick to drag the cube onto the red target",
        "pick up the stick and use it to push or pull the cube onto the red target",
        "drag the block towards the red square on the table top",
        "grasping the stick by one end, pick it up and use the its other end to move the block onto the red target",
    ],
    19: [
        "use the stick to drag the cube onto the white target",
        "pick up the stick and use it to push or pull the cube onto the white target",
        "drag the block towards the white square on the table top",
        "grasping the stick by one end, pick it up and use the its other end to move the block onto the white target",
    ],
}


def test_reach_and_drag_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_reach_and_drag_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_reach_and_drag_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's reach_and_drag.py samples nothing and has no base_rotation_bounds: its layout is fixed on the base,
# which turns +-3.14 (Task's default). The stick turns with the base (the target square's yaw here).
def test_reach_and_drag_placement_is_upstreams():
    check_placement(TASK, (YawRange("target0", -3.14, 3.14), YawRange("stick", 0.0, 0.0, relative_to="target0")),
                    config(TASK))
