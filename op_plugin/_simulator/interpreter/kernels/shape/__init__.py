"""Shape and conversion ops (CANN ops-math ``conversion/``).

* creation: Fill(D), Empty, Range, LinSpace
* identity: ZerosLike, Identity(N), TensorMove, Snapshot, StopGradient, PreventGradient, Cmo
* layout: Shape*, Reshape, Squeeze, ExpandDims, Flatten, Bitcast, Transpose, Concat, Pack, Split, Tile,
  BroadcastTo, Tril, Triu
* pad: PadV3, MirrorPad, PadV3Grad
* slice: Slice, StridedSlice(V2), AsStrided, ViewCopy, Assign
"""
