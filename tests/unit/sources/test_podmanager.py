"""An API pod as the kubelet keeps it (pods_api/sources/podmanager.py): the rules of its config's
checkAndUpdatePod, which the registered kubelet's Pods API was seen to follow (its pods keep the
resourceVersion and managedFields they were first seen with, and show a label edit)."""

from __future__ import annotations

from typing import Any

from pods_api.sources.podmanager import Kept

SEEN = {"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-12-06T03:46:29.3Z"}


def version(rv: str, *, labels: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "web",
        "uid": "u1",
        "resourceVersion": rv,
        "managedFields": [{"manager": rv}],
    }
    meta |= {"labels": labels or {"app": "web"}, "annotations": more.pop("annotations", {})}
    meta |= {k: more.pop(k) for k in ("deletionTimestamp", "deletionGracePeriodSeconds") if k in more}
    return {"metadata": meta, "spec": more.pop("spec", {"containers": [{"name": "main"}]}), "status": more}


def first() -> Kept:
    pod = version("1")
    pod["metadata"]["annotations"] = dict(SEEN)
    return Kept.first(pod)


def test_a_status_change_keeps_the_metadata_first_seen() -> None:
    kept = first()
    later = version("7", phase="Running")
    assert kept.update(later) is kept
    served = kept.served(later)
    assert served["metadata"]["resourceVersion"] == "1"
    assert served["metadata"]["managedFields"] == [{"manager": "1"}]
    assert served["metadata"]["annotations"] == SEEN
    assert served["status"] == {"phase": "Running"}


def test_a_label_edit_changes_the_labels_and_nothing_else_of_the_metadata() -> None:
    edited = version("9", labels={"app": "web", "edited": "yes"})
    served = first().update(edited).served(edited)
    assert served["metadata"]["labels"] == {"app": "web", "edited": "yes"}
    assert served["metadata"]["resourceVersion"] == "1"
    assert served["metadata"]["annotations"] == SEEN  # the kubelet's own are kept


def test_an_annotation_edit_keeps_the_kubelet_s_own_annotations() -> None:
    edited = version("9", annotations={"team": "a"})
    served = first().update(edited).served(edited)
    assert served["metadata"]["annotations"] == {"team": "a", **SEEN}


def test_a_graceful_delete_and_a_spec_change_are_taken() -> None:
    deleting = version("9", deletionTimestamp="2026-12-06T04:00:00Z", deletionGracePeriodSeconds=20)
    kept = first().update(deleting)
    meta = kept.served(deleting)["metadata"]
    assert (meta["deletionTimestamp"], meta["deletionGracePeriodSeconds"]) == ("2026-12-06T04:00:00Z", 20)
    resized = version("10", spec={"containers": [{"name": "main", "image": "b"}]})
    assert kept.update(resized).served(resized)["spec"] == resized["spec"]
    # ... and a later version without them drops them (as the kubelet copies the pointers).
    assert "deletionTimestamp" not in kept.update(resized).served(resized)["metadata"]
