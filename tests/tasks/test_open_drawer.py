"""open_drawer on both embedded backends, its descriptions as upstream's, and a state that does not tell
the chosen drawer."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_state_hides_target

from rlbench_vec.backends.mujoco.tasks.open_drawer import OPTIONS

TASK = "open_drawer"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/open_drawer.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "open the bottom drawer",
        "grip the bottom handle and pull the bottom drawer open",
        "slide the bottom drawer open",
    ],
    2: [
        "open the top drawer",
        "grip the top handle and pull the top drawer open",
        "slide the top drawer open",
    ],
}


def test_open_drawer_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_open_drawer_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_open_drawer_on_mjwarp():
    check_mjwarp(TASK)


def test_open_drawer_state_does_not_tell_the_chosen_drawer():
    check_state_hides_target(TASK, [(0, v) for v in range(3)],
                             lambda sim, v: sim.world.geom_position(f"handle_{OPTIONS[v]}"))
