from task_checks import check_mjwarp, check_mujoco

TASK = "reach_target"


def test_reach_target_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="reach the red target")


def test_reach_target_on_mjwarp():
    check_mjwarp(TASK)
