"""The commutative variants of POSIX calls in the POSIX model, against the answers the
commutativity rule gives for them: an unordered socket's receives commute where an
ordered one's diverge, posix_spawn commutes with open where fork does not, fstatx without
the link count commutes with link where fstat does not."""

import functools

import pytest
import z3

from scalecheck.engine.commute import explore_pair
from scalecheck.interfaces.posix import Posix

Int, Bool = z3.IntSort(), z3.BoolSort()


@functools.cache
def regions(a, b):
    records, found, _ = explore_pair(Posix, a, b)
    errors = [r.error for r in records if r.commutes is None or r.unknown]
    assert not errors, errors
    return found


def verdicts(a, b, *scenario) -> set:
    """The verdicts (True: commutes) of the paths of ``a || b`` that meet the scenario."""
    met = set()
    for region in regions(a, b):
        solver = z3.Solver()
        solver.add(*region.decisions, *region.assumptions, *scenario)
        if solver.check() == z3.sat:
            met.add(region.commutes)
    return met


def base(name, result=Int):
    """A function of the initial state, as the explorer names it."""
    return z3.Function(name, Int, result)


def arg(name, sort=Int):
    return z3.Const(name, sort)


def queue_of_two_different_bytes(sock, unordered):
    queued = base("sockets.queued[1]", Bool)(sock), base("sockets.queued[0]", Bool)(sock)
    data = base("sockets.data[0]")(sock), base("sockets.data[1]")(sock)
    return [*queued, data[0] != data[1], base("sockets.unordered", Bool)(sock) == unordered]


def test_ordered_receives_of_two_different_messages_diverge():
    scenario = [arg("A.sock") == arg("B.sock"), *queue_of_two_different_bytes(arg("A.sock"), False)]
    assert verdicts("recvfrom", "recvfrom", *scenario) == {False}


def test_unordered_receives_of_two_different_messages_commute():
    scenario = [arg("A.sock") == arg("B.sock"), *queue_of_two_different_bytes(arg("A.sock"), True)]
    assert verdicts("recvfrom", "recvfrom", *scenario) == {True}


def test_sends_to_a_full_socket_fail_in_both_orders():
    sock = arg("A.sock")
    full = [base(f"sockets.queued[{i}]", Bool)(sock) for i in range(2)]
    assert verdicts("sendto", "sendto", sock == arg("B.sock"), *full) == {True}
    # One free slot: the second send finds the queue full, whichever runs second.
    one_free = [full[0], z3.Not(full[1]), base("sockets.unordered", Bool)(sock) == False]  # noqa: E712
    assert verdicts("sendto", "sendto", sock == arg("B.sock"), *one_free) == {False}


def open_succeeds_in(pid):
    return [
        arg("B.pid") == pid,
        base("fname_to_inum.present", Bool)(arg("B.pn")),
        z3.Not(z3.And(arg("B.creat", Bool), arg("B.excl", Bool))),
        z3.Not(arg("B.trunc", Bool)),
    ]


def test_fork_never_commutes_with_an_open_that_succeeds_in_the_same_process():
    assert verdicts("fork", "open", arg("A.pid") == 0, *open_succeeds_in(0)) == {False}


def test_posix_spawn_of_another_fd_commutes_with_open():
    spawned_fd_open = base("procs[0].fds.present", Bool)(arg("A.fd"))
    scenario = [arg("A.pid") == 0, spawned_fd_open, *open_succeeds_in(0)]
    assert verdicts("posix_spawn", "open", *scenario) == {True}


def linked_fd():
    """A's fd (in process 0) refers to the inode that B's link gives a new name."""
    fd = arg("A.fd")
    return [
        arg("A.pid") == 0,
        base("procs[0].fds.present", Bool)(fd),
        z3.Not(base("procs[0].fds.ispipe", Bool)(fd)),
        base("fname_to_inum.present", Bool)(arg("B.old")),
        z3.Not(base("fname_to_inum.present", Bool)(arg("B.new"))),
        base("procs[0].fds.inum")(fd) == base("fname_to_inum")(arg("B.old")),
    ]


def test_fstat_of_a_file_being_linked_diverges():
    assert verdicts("fstat", "link", *linked_fd()) == {False}


@pytest.mark.parametrize("nlink, expected", [(False, {True}), (True, {False})])
def test_fstatx_commutes_with_link_unless_it_asks_for_the_link_count(nlink, expected):
    assert verdicts("fstatx", "link", arg("A.nlink", Bool) == nlink, *linked_fd()) == expected
    assert verdicts("fstatx", "link", arg("A.nlink", Bool) == False) >= {True}  # noqa: E712


def test_exec_closes_only_close_on_exec_fds():
    # exec || fstat in one process: fstat's fd survives exec unless it is close-on-exec.
    fd = arg("B.fd")
    present = base("procs[0].fds.present", Bool)(fd)
    cloexec = base("procs[0].fds.cloexec", Bool)(fd)
    same = [arg("A.pid") == 0, arg("B.pid") == 0, present]
    assert verdicts("exec", "fstat", *same, z3.Not(cloexec)) == {True}
    assert verdicts("exec", "fstat", *same, cloexec) == {False}


def test_the_analyzer_compares_fstatx_without_nlink_with_fstat(tmp_path):
    from scalecheck.analyze import variants

    (comparison,) = [v for v in Posix.variants if v.variant == ("fstatx", "link")]
    sides = variants.compare(Posix, comparison)
    assert sides["variant"]["commutes"]["text"] == "always"
    posix = sides["posix"]
    assert posix["commutes"]["text"] != "always" and posix["paths"] > posix["commutative_paths"]
    # The variant's side holds only the paths where the mask leaves out the link count.
    assert sides["variant"]["paths"] < len(regions("fstatx", "link"))
