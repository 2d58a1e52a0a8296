"""P4Runtime input rules of the specification, over gRPC (issue 23): canonical LPM values, `prefix_len 0`
written as an omitted field, empty byte strings refused, zero-padded ones of any length accepted and read back in
canonical form, OUT_OF_RANGE for values wider than their field, and
FAILED_PRECONDITION for a controller that changes its device id."""
import queue

import grpc
import pytest
from p4.v1 import p4runtime_pb2

from test_p4runtime import Controller, compiled, ids, lpm_update, push_pipeline, read_table, switch, update_errors  # noqa: F401

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE.value[0]


def primary(stub):
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    return ctl


def test_non_canonical_lpm_values_are_refused(switch, compiled):
    stub, _ = switch
    ctl = primary(stub)
    push_pipeline(ctl, compiled)
    info = compiled[1]
    ctl.write(lpm_update(info, [10, 0, 0, 0], 8, 1))
    # the case: 10.0.0.1/8 and 10.255.0.0/8 are not 10.0.0.0/8 and do not become entries of their own
    for value in ([10, 0, 0, 1], [10, 255, 0, 0]):
        with pytest.raises(grpc.RpcError) as e:
            ctl.write(lpm_update(info, value, 8, 2))
        [err] = update_errors(e.value)
        assert err.canonical_code == INVALID_ARGUMENT and "outside its /8 prefix" in err.message, err.message
    t, _ = ids(info)
    got = read_table(stub, t["GwIngress.ipv4_lpm"].preamble.id)
    assert [(bytes(x.match[0].lpm.value), x.match[0].lpm.prefix_len) for x in got] == [(bytes([10, 0, 0, 0]), 8)]
    # prefix length 0 with a value: the field must be omitted instead
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(lpm_update(info, [0], 0, 2))
    assert "omit the field" in update_errors(e.value)[0].message
    # the deletion of the one entry leaves the table empty
    ctl.write(lpm_update(info, [10, 0, 0, 0], 8, 1, kind=p4runtime_pb2.Update.DELETE))
    assert read_table(stub, t["GwIngress.ipv4_lpm"].preamble.id) == []


def test_empty_and_too_wide_values(switch, compiled):
    stub, _ = switch
    ctl = primary(stub)
    push_pipeline(ctl, compiled)
    info = compiled[1]
    empty = lpm_update(info, [10, 1, 0, 0], 16, 1)
    empty.entity.table_entry.action.action.params[2].value = b""
    wide = lpm_update(info, [10, 2, 0, 0], 16, 1)
    wide.entity.table_entry.action.action.params[2].value = b"\x02\x00"  # 10 bits for a bit<9> port
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(empty, wide)
    errs = update_errors(e.value)
    assert errs[0].canonical_code == INVALID_ARGUMENT and "empty byte string" in errs[0].message, errs[0].message
    assert errs[1].canonical_code == OUT_OF_RANGE and "10 significant bits" in errs[1].message, errs[1].message


def test_zero_padded_values_of_any_length_are_accepted_and_read_back_canonical(switch, compiled):
    stub, _ = switch
    ctl = primary(stub)
    push_pipeline(ctl, compiled)
    info = compiled[1]
    padded = lpm_update(info, [10, 3, 0, 0], 16, 1)
    # port 1 of a bit<9> parameter in 6 bytes (the field has 2): the specification limits the value, not the string
    padded.entity.table_entry.action.action.params[2].value = b"\x00" * 5 + b"\x01"
    padded.entity.table_entry.match[0].lpm.value = b"\x00\x00" + bytes([10, 3, 0, 0])
    ctl.write(padded)
    t, _ = ids(info)
    [got] = read_table(stub, t["GwIngress.ipv4_lpm"].preamble.id)
    assert bytes(got.match[0].lpm.value) == bytes([10, 3, 0, 0])
    assert bytes(got.action.action.params[2].value) == b"\x01"
    # padding does not hide a value too wide for its field: 0x0200 in 4 bytes for a bit<9>
    wide = lpm_update(info, [10, 4, 0, 0], 16, 1)
    wide.entity.table_entry.action.action.params[2].value = b"\x00\x00\x02\x00"
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(wide)
    [err] = update_errors(e.value)
    assert err.canonical_code == OUT_OF_RANGE and "10 significant bits" in err.message, err.message


def test_a_controller_cannot_change_its_device_id(switch):
    stub, _ = switch
    requests = queue.Queue()
    stream = stub.StreamChannel(iter(requests.get, None))

    def arbitrate(device_id):
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = 10
        requests.put(req)

    arbitrate(1)
    assert next(stream).arbitration.status.code == 0
    arbitrate(2)
    with pytest.raises(grpc.RpcError) as e:
        next(stream)
    requests.put(None)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "cannot change its device id" in e.value.details()


def test_an_unknown_device_id_is_not_found(switch):
    stub, _ = switch
    req = p4runtime_pb2.StreamMessageRequest()
    req.arbitration.device_id = 7
    req.arbitration.election_id.low = 10
    with pytest.raises(grpc.RpcError) as e:
        next(stub.StreamChannel(iter([req])))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
