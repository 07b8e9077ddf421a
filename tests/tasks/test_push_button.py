from task_checks import check_mjwarp, check_mujoco

TASK = "push_button"


def test_push_button_on_mujoco():
    check_mujoco(TASK, variations=18, first_description="push the maroon button")


def test_push_button_on_mjwarp():
    check_mjwarp(TASK)
