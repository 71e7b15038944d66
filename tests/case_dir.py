"""Write one ONNX backend-test case: OUT/NAME/model.onnx and test_data_set_0/{input,output}_k.pb
(the layout `onnxexec test` reads). Shared by the generated-case scripts."""
import os

import onnx
from onnx import numpy_helper


def write_case(out, name, model, inputs, outputs):
    """inputs, outputs: lists of (tensor name, numpy array), in the graph's order."""
    d = os.path.join(out, name, "test_data_set_0")
    os.makedirs(d)
    onnx.save(model, os.path.join(out, name, "model.onnx"))
    for kind, values in (("input", inputs), ("output", outputs)):
        for k, (tname, arr) in enumerate(values):
            with open(os.path.join(d, "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(numpy_helper.from_array(arr, tname).SerializeToString())
