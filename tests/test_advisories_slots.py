"""The caps on Subscribe streams, as plain bookkeeping (the service's use of them is in
test_advisories_service.py, over real gRPC)."""

from __future__ import annotations

import pytest

from processor.advisories.auth import Authenticator
from processor.advisories.slots import Limits, Refused, Slot, Slots, caller_of, peer_host
from processor.config import AdvisoriesConfig

TENANTS = frozenset({"acme", "globex", "initech", "umbrella", "hooli"})


def slots(
    total: int = 1000,
    per_tenant: int = 250,
    per_caller: int = 100,
    reserved: int = 16,
    tenants: frozenset[str] = TENANTS,
) -> Slots:
    return Slots(Limits(total, per_tenant, per_caller, reserved), lambda: tenants)


def take(table: Slots, count: int, tenant: str, caller: str | None = None) -> list[Slot]:
    return [table.take(tenant, caller or f"{tenant}-{i}") for i in range(count)]


def refusal(table: Slots, tenant: str, caller: str) -> str:
    with pytest.raises(Refused) as refused:
        table.take(tenant, caller)
    return str(refused.value)


def test_one_caller_cannot_take_its_tenants_every_stream() -> None:
    table = slots(per_caller=3)
    take(table, 3, "acme", "token-1")
    assert "advisories.max_subscribers_per_caller" in refusal(table, "acme", "token-1")
    table.take("acme", "token-2")  # another token of the same tenant
    assert (table.of_tenant("acme"), table.of_caller("token-1"), table.held) == (4, 3, 4)


def test_one_tenant_cannot_take_every_stream() -> None:
    table = slots(per_tenant=5)
    take(table, 5, "acme")
    assert "advisories.max_subscribers_per_tenant" in refusal(table, "acme", "new-caller")
    table.take("globex", "g")


def test_four_tenants_at_their_cap_leave_the_fifth_its_reservation() -> None:
    """Defaults: 4 x 250 would fill 1000; the fourth stops where the fifth's 16 begin."""
    table = slots()
    for tenant in ("acme", "globex", "initech"):
        take(table, 250, tenant)
    fourth = 0
    with pytest.raises(Refused, match="reserved for other tenants"):
        while True:
            table.take("umbrella", f"u{fourth // 100}")
            fourth += 1
    assert fourth == 1000 - 750 - 16
    take(table, 16, "hooli")  # the fifth gets its reservation, all of it
    assert table.held == 1000
    assert "advisories.max_subscribers)" in refusal(table, "hooli", "h-late")


def test_a_tenant_within_its_reservation_gets_in_while_others_cannot() -> None:
    table = slots(total=10, per_tenant=10, reserved=2, tenants=frozenset({"a", "b", "c"}))
    take(table, 6, "a")  # 6 + 2 (b) + 2 (c) = 10: a has no more room
    assert "reserved for other tenants" in refusal(table, "a", "a-more")
    take(table, 2, "b")
    assert "reserved" in refusal(table, "b", "b-more")  # b's own are used; c's 2 stay
    take(table, 2, "c")
    assert table.held == 10


def test_reservations_larger_than_the_service_go_first_come() -> None:
    """More tenants than the global cap can reserve for: a tenant within its reservation
    still gets in while there is room at all, and none over the global cap."""
    many = frozenset(f"t{i}" for i in range(100))
    table = slots(total=20, reserved=1, tenants=many)
    take(table, 1, "t0")  # its reservation
    assert "reserved for other tenants" in refusal(table, "t0", "t0-more")
    for i in range(1, 20):
        table.take(f"t{i}", f"c{i}")
    assert table.held == 20
    assert "advisories.max_subscribers)" in refusal(table, "t50", "c50")


def test_without_tokens_the_per_caller_cap_holds_and_the_tenant_cap_does_not() -> None:
    """No token map: one tenant (""), no reservations; each host is a caller."""
    table = slots(total=10, per_tenant=2, per_caller=3, reserved=16, tenants=frozenset())
    take(table, 3, "", "ipv4:10.0.0.1")
    assert "advisories.max_subscribers_per_caller" in refusal(table, "", "ipv4:10.0.0.1")
    take(table, 3, "", "ipv4:10.0.0.2")
    take(table, 3, "", "ipv4:10.0.0.3")
    take(table, 1, "", "ipv4:10.0.0.4")
    assert "advisories.max_subscribers)" in refusal(table, "", "ipv4:10.0.0.5")


def test_a_slot_given_back_is_free_again_and_only_once() -> None:
    table = slots(total=2, per_tenant=2, per_caller=2, reserved=0)
    first, second = take(table, 2, "acme", "tok")
    assert "advisories.max_subscribers_per_caller" in refusal(table, "acme", "tok")
    table.give_back(first)
    table.give_back(first)  # again: nothing more is freed
    assert (table.held, table.of_tenant("acme"), table.of_caller("tok")) == (1, 1, 1)
    third = table.take("acme", "tok")
    assert "advisories.max_subscribers_per_caller" in refusal(table, "acme", "tok")
    table.give_back(second)
    table.give_back(third)
    assert (table.held, table.of_tenant("acme"), table.of_caller("tok")) == (0, 0, 0)


def test_the_token_map_is_read_at_each_request() -> None:
    known: set[str] = {"a"}
    table = Slots(Limits(4, 4, 4, 2), lambda: known)
    take(table, 2, "a")
    table.take("a", "x")
    known.add("b")  # a tenant added to the map: its reservation counts from now on
    assert "reserved" in refusal(table, "a", "y")
    take(table, 1, "b")


def test_a_caller_is_its_token_digest_or_its_peer_host() -> None:
    assert caller_of("tokA", "ipv4:127.0.0.1:5000") == caller_of("tokA", "ipv6:[::1]:6000")
    assert caller_of("tokA", "x") != caller_of("tokB", "x")
    assert "tokA" not in caller_of("tokA", "x")  # the tables hold no token
    assert caller_of(None, "ipv4:10.1.2.3:51234") == "ipv4:10.1.2.3"
    assert caller_of("", "ipv6:[fe80::1%eth0]:443") == "ipv6:[fe80::1%eth0]"
    assert peer_host("unix:/run/harness.sock") == "unix:/run/harness.sock"
    assert peer_host("ipv4:10.0.0.1") == "ipv4:10.0.0.1"  # no port to strip
    assert peer_host("") == ""


def test_the_authenticator_names_the_tenants_of_its_token_map() -> None:
    config = AdvisoriesConfig(tokens={"t1": "acme", "t2": "acme", "t3": "globex"})
    assert Authenticator(config).tenants() == {"acme", "globex"}
    assert Authenticator(AdvisoriesConfig()).tenants() == frozenset()
    limits = Limits.of(AdvisoriesConfig())
    assert limits == Limits(1000, 250, 100, 16)
