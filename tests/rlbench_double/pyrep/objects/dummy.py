from pyrep.objects.object import Object


class Dummy(Object):

    @staticmethod
    def create(size=0.01) -> 'Dummy':
        return Dummy()
