"""close_jar on both embedded backends, its descriptions as upstream's, and a state that does not tell
the chosen jar."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_state_hides_target, coloured

from rlbench_vec.backends.mujoco.tasks.base import COLORS

TASK = "close_jar"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/close_jar.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "close the red jar",
        "screw on the red jar lid",
        "grasping the lid, lift it from the table and use it to seal the red jar",
        "pick up the lid from the table and put it on the red jar",
    ],
    19: [
        "close the white jar",
        "screw on the white jar lid",
        "grasping the lid, lift it from the table and use it to seal the white jar",
        "pick up the lid from the table and put it on the white jar",
    ],
}


def test_close_jar_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_close_jar_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_close_jar_on_mjwarp():
    check_mjwarp(TASK)


def test_close_jar_state_does_not_tell_the_chosen_jar():
    # upstream's jar of variation v is jar{v % 2}, the one of the variation's colour
    check_state_hides_target(TASK, [(0, 0), (0, 1)], lambda sim, v: sim.world.position(
        coloured(sim, ("jar0", "jar1"), COLORS[v][1])))
