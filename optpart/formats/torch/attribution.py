"""Module attribution of a traced step: which ``named_modules()`` path made each FX node.

Forward pre/post hooks on every submodule stamp the nodes the submodule creates with its
path (through ``torch.fx.traceback``'s node metadata, as ``torch.export`` does);
autograd pre-hooks on the backward graph stamp each backward node with the sequence
number of the forward operator it differentiates, and the backward node inherits that
operator's module (AOTAutograd's ``copy_fwd_metadata_to_bw_nodes`` does the same).
``trace._describe`` reads the stamps back.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []


class _ModuleStamper:
    """Forward hooks that stamp every FX node a submodule creates with that submodule's path."""

    KEY = "optpart_module"
    BW_KEY = "optpart_backward_of"

    def __init__(self, module):
        self.stack: list[str] = []
        self.handles: list[Any] = []
        for path, mod in module.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._enter(path)))
            self.handles.append(mod.register_forward_hook(self._leave(path)))

    @staticmethod
    def _set(custom: dict) -> None:
        import torch.fx.traceback as fxt

        fxt.current_meta["custom"] = custom

    def _enter(self, path):
        def hook(mod, args):
            self.stack.append(path)
            self._set({self.KEY: path})
        return hook

    def _leave(self, path):
        def hook(mod, args, out):
            if self.stack and self.stack[-1] == path:
                self.stack.pop()
            self._set({self.KEY: self.stack[-1] if self.stack else ""})
        return hook

    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def stamp_backward(self, loss) -> None:
        """Autograd pre-hooks on the graph behind ``loss``: backward nodes get their forward's number."""
        seen: set[int] = set()
        todo = [loss.grad_fn] if loss.grad_fn is not None else []
        while todo:
            fn = todo.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            seq = int(fn._sequence_nr())
            fn.register_prehook(lambda grad_outputs, seq=seq: self._set({self.BW_KEY: seq}))
            todo.extend(nxt for nxt, _ in fn.next_functions)
        self._set({self.KEY: ""})

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
