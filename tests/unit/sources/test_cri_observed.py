"""What a relist tells as events: the kubelet's Created and Started for each container, once,
dated by the runtime; a restart (a new container) told again; a pod not served told once it is."""

from __future__ import annotations

from pods_api.sources.cri.observed import Observer
from pods_api.sources.cri.status import INIT, REGULAR, Container, ContainerState, Sandbox

SECOND = 1_000_000_000
UID = "11111111-2222-3333-4444-555555555555"
SANDBOX = Sandbox("sb1", UID, "web", "prod", 0, True, 100 * SECOND)


def ctr(cid: str, state: ContainerState, *, created: int, started: int = 0, kind: str = REGULAR) -> Container:
    return Container(
        id=cid,
        sandbox_id="sb1",
        uid=UID,
        name="main" if kind == REGULAR else "setup",
        kind=kind,
        state=state,
        created_at=created * SECOND,
        started_at=started * SECOND,
    )


def told(observer: Observer, *containers: Container, served: bool = True) -> list[tuple[str, str, str, int]]:
    seen = observer.changes({UID: [SANDBOX]}, {UID: list(containers)}, lambda uid: served)
    for s in seen:
        assert (s.involved.namespace, s.involved.pod, s.involved.uid, s.type) == (
            "prod",
            "web",
            UID,
            "Normal",
        )
    return [(s.reason, s.message, s.involved.field_path, s.at // SECOND) for s in seen]


def test_created_then_started_once_each_as_the_kubelet_words_them() -> None:
    observer = Observer()
    assert told(observer, ctr("c1", ContainerState.CREATED, created=101)) == [
        ("Created", "Created container: main", "spec.containers{main}", 101)
    ]
    running = ctr("c1", ContainerState.RUNNING, created=101, started=102)
    assert told(observer, running) == [("Started", "Started container main", "spec.containers{main}", 102)]
    assert told(observer, running) == []
    assert (
        told(observer, ctr("c1", ContainerState.EXITED, created=101, started=102)) == []
    )  # an exit: no event


def test_a_restart_is_a_new_container_told_again_and_the_first_relist_tells_both_in_order() -> None:
    dead = ctr("c1", ContainerState.EXITED, created=101, started=102)
    again = ctr("c2", ContainerState.RUNNING, created=110, started=111)
    assert [(r, at) for r, _, _, at in told(Observer(), again, dead)] == [
        ("Created", 101),
        ("Started", 102),
        ("Created", 110),
        ("Started", 111),
    ]


def test_init_containers_are_named_by_their_field_path() -> None:
    init = ctr("i1", ContainerState.EXITED, created=101, started=102, kind=INIT)
    assert {path for _, _, path, _ in told(Observer(), init)} == {"spec.initContainers{setup}"}


def test_a_pod_not_served_yet_is_told_once_it_is() -> None:
    observer = Observer()
    running = ctr("c1", ContainerState.RUNNING, created=101, started=102)
    assert told(observer, running, served=False) == []
    assert [r for r, *_ in told(observer, running)] == ["Created", "Started"]
    assert told(observer, running) == []


def test_containers_without_a_sandbox_are_no_pods_events() -> None:
    orphan = ctr("c1", ContainerState.RUNNING, created=101, started=102)
    assert Observer().changes({}, {UID: [orphan]}, lambda uid: True) == []
