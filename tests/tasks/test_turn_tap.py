from task_checks import check_mjwarp, check_mujoco

TASK = "turn_tap"


def test_turn_tap_on_mujoco():
    check_mujoco(TASK, variations=2, first_description="turn left tap")


def test_turn_tap_on_mjwarp():
    check_mjwarp(TASK)
