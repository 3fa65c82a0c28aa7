"""The root module's own tensors sit where accelerate puts them: on its main device.

``accelerate.dispatch_model`` moves the root module's own parameters and buffers to the main
device (the first device of the map) whatever a key naming them says, and the operators that
read them run there. A map whose key said another device was a plan accelerate does not run:
its memory and moves counted the tensor where it never is.
"""

from __future__ import annotations

import optpart
from optpart import export


def _problem():
    """Two modules, then top-level code scaling by a parameter of the root (CLIP's ``logit_scale``), then a head."""
    def op(nid, module, param):
        return {"id": nid, "time": 1.0, "memory": 8.0, "param_bytes": 4.0, "output_bytes": 4.0, "module": module,
                "params": [param]}

    nodes = [op("stem", "stem", "stem.weight"), op("enc", "enc", "enc.weight"),
             {"id": "mul", "time": 1.0, "memory": 4.0, "output_bytes": 4.0},  # top-level code: no module
             op("head", "head", "head.weight"),
             {"id": "update.logit_scale", "time": 1.0, "memory": 2.0, "param_bytes": 2.0, "param": "logit_scale"}]
    edges = [{"src": "stem", "dst": "enc", "bytes": 4}, {"src": "enc", "dst": "mul", "bytes": 4},
             {"src": "mul", "dst": "head", "bytes": 4}, {"src": "mul", "dst": "update.logit_scale", "bytes": 2}]
    return optpart.Problem.build(nodes=nodes, edges=edges).with_devices(2)


def test_a_root_tensor_is_mapped_and_placed_on_the_main_device():
    problem = _problem()
    plan = export.closest_plan(problem, {"stem": "dev0", "enc": "dev1", "mul": "dev1", "head": "dev1",
                                         "update.logit_scale": "dev1"}, rule="accelerate")
    dmap = plan.device_map
    assert dmap["stem"] == 0 and dmap["enc"] == 1 and dmap["head"] == 1
    assert dmap["logit_scale"] == min(dmap.values()) == 0
    assert plan.placement[problem.node_ids.index("update.logit_scale")] == 0  # scored where it is


def test_a_map_on_one_device_keeps_the_root_tensor_with_everything():
    problem = _problem()
    plan = export.closest_plan(problem, {nid: "dev1" for nid in problem.node_ids}, rule="accelerate")
    assert plan.device_map == {"": 1}
    assert plan.run.transfers == 0 and set(plan.placement.tolist()) == {1}
