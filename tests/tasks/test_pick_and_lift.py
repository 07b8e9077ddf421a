from task_checks import check_mjwarp, check_mujoco

TASK = "pick_and_lift"


def test_pick_and_lift_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="pick up the red block and lift it up to the target")


def test_pick_and_lift_on_mjwarp():
    check_mjwarp(TASK)
