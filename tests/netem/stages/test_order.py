from netem.stages.base import Chunk
from netem.stages.order import InOrder


def test_a_chunk_never_overtakes_the_one_before_it():
    order = InOrder()
    deadlines = []
    for d in (5.0, 3.0, 7.0, 6.0):
        c = Chunk(None, 1, 0.0, d)
        order.pipe(c)
        deadlines.append(c.deadline)
    assert deadlines == [5.0, 5.0, 7.0, 7.0]
