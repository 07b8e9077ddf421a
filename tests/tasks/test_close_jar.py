from task_checks import check_mjwarp, check_mujoco

TASK = "close_jar"


def test_close_jar_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="close the red jar")


def test_close_jar_on_mjwarp():
    check_mjwarp(TASK)
