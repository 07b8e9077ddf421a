from rlbench.backend.task import Task


class OpenDrawer(Task):

    def init_episode(self, index: int):
        super().init_episode(index)
        return ['open the %s drawer' % ['bottom', 'middle', 'top'][index]]

    def variation_count(self) -> int:
        return 3
