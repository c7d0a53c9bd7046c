"""fxcpp.experimental.accelerator_partitioner / partitioner_utils against torch.fx's: the same model,
traced by each library and partitioned by each library's Partitioner, gives the same partitions
(node names, memory, devices, parents), the same DAG, the same split code and the same outputs,
and the latency helpers give the same numbers on either library's partitions. On torch 2.x
torch.fx's own module would lose every edge of an fxcpp graph (its map_arg skips fxcpp nodes):
Note [torch.fx code with a map_arg for both libraries]."""
import pytest
import torch
import torch.fx as tfx
import torch.fx.experimental.accelerator_partitioner as tap
import torch.fx.experimental.partitioner_utils as tpu
from torch.fx.passes import graph_manipulation as tgm

import fxcpp
import fxcpp.experimental.accelerator_partitioner as fap
import fxcpp.experimental.partitioner_utils as fpu
from fxcpp.passes import graph_manipulation as fgm


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
        self.c = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        h = torch.relu(self.a(x)) + y
        g = self.b(h) * torch.sigmoid(h)
        return self.c(g + h), g.sum()


def _latencies(gm):
    out = {}
    for n in gm.graph.nodes:
        if n.op not in {'output', 'placeholder', 'get_attr'}:
            total, output = n.size_bytes.total_size, n.size_bytes.output_size
            out[n] = tpu.NodeLatency(total, 2.0 * total if total == output else output)
    return out


def _partition(lib, ap, gm_module, mode, latency):
    torch.manual_seed(0)
    model = Model()
    gm = lib.symbolic_trace(model)
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    gm_module.get_size_of_all_nodes(gm, [x, y])
    devices = [tpu.Device(f'dev_{i}', 1200, i) for i in range(3)]
    kw = {}
    if latency:
        kw = {'node_to_latency_mapping': _latencies(gm), 'transfer_rate_bytes_per_sec': 2}
    partitioner = ap.Partitioner()
    res = partitioner.partition_graph(gm, model, tpu.PartitionerConfig(devices, mode, **kw))
    parts = [(sorted(n.name for n in p.nodes), p.used_mem_bytes, p.logical_device_ids,
              sorted(q.partition_id for q in p.parents), p.bfs_level) for p in partitioner.partitions]
    dag = [(d.submodule_node.name, [n.name for n in d.input_nodes], [n.name for n in d.output_nodes],
            d.logical_device_ids, d.size_bytes) for d in res.dag.nodes]
    out = res.module_with_submodules(x, y)
    assert all(torch.equal(a, b) for a, b in zip(out, gm(x, y)))
    return gm, partitioner, res, (parts, dag, res.module_with_submodules.code,
                                  [getattr(res.module_with_submodules, f'submod_{i}').code
                                   for i in range(len(parts))])


MODES = [tpu.PartitionMode.size_based, tpu.PartitionMode.cost_aware, tpu.PartitionMode.kl_based]


@pytest.mark.parametrize('mode', MODES, ids=lambda m: m.name)
def test_same_partitions_as_torch_fx(mode):
    latency = mode != tpu.PartitionMode.size_based
    _, _, theirs_res, theirs = _partition(tfx, tap, tgm, mode, latency)
    gm, partitioner, res, ours = _partition(fxcpp, fap, fgm, mode, latency)
    assert ours == theirs
    assert ours[0] and any(p[0] for p in ours[0])  # partitions hold nodes: not a vacuous match
    assert isinstance(res.module_with_submodules, fxcpp.GraphModule)
    # the partitions hold the caller's own nodes
    mine = set(gm.graph.nodes)
    assert all(n in mine for p in partitioner.partitions for n in p.nodes)


def test_partition_edits_count_inputs():
    # Partition.add_node/remove_node follow a node's inputs: sizes as torch.fx's
    got = []
    for lib, ap, pu, gm_module in ((tfx, tap, tpu, tgm), (fxcpp, fap, fpu, fgm)):
        model = Model()
        gm = lib.symbolic_trace(model)
        gm_module.get_size_of_all_nodes(gm, [torch.randn(2, 8), torch.randn(2, 8)])
        p = pu.Partition(0)
        sizes = []
        for n in gm.graph.nodes:
            if n.op not in {'placeholder', 'output'}:
                p.add_node(n)
                sizes.append(p.used_mem_bytes)
        added = sorted(p.nodes, key=lambda n: n.name)
        names_after_add = [n.name for n in added]
        for n in [n for n in gm.graph.nodes if n.op == 'call_module'][:2]:
            p.remove_node(n)
            sizes.append(p.used_mem_bytes)
        node = next(n for n in gm.graph.nodes if n.name == 'add')
        sizes.append(pu.get_extra_size_of(node, {n for n in gm.graph.nodes if n.name == 'relu'}))
        got.append((sizes, names_after_add, sorted(n.name for n in p.nodes)))
    assert got[0] == got[1]
    assert {'x', 'y'} <= set(got[1][1])  # the placeholders read were added with their users


def test_latency_helpers_match():
    got = []
    for lib, ap, pu, gm_module in ((tfx, tap, tpu, tgm), (fxcpp, fap, fpu, fgm)):
        gm, partitioner, _, _ = _partition(lib, ap, gm_module, tpu.PartitionMode.size_based, False)
        mapping = pu.get_partition_to_latency_mapping(partitioner.partitions, _latencies(gm))
        got.append(([tuple(mapping[p]) for p in partitioner.partitions],
                    pu.get_latency_of_partitioned_graph(partitioner.partitions, mapping, 2)))
    assert got[0] == got[1] and got[1][1] > 0


def test_value_types_are_torch_fx_own():
    for name in ('Device', 'NodeLatency', 'PartitionMode', 'PartitionerConfig'):
        assert getattr(fpu, name) is getattr(tpu, name)
    assert fap.__all__ and set(fap.__all__) <= set(dir(tap))
