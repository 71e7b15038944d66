"""Gradient cases: RNN, GRU and LSTM (graph/grad_rnn.c, an unrolled backward pass).

Sizes: 3 steps, batch 2, input 3, hidden 4. Every input is a random graph input, so X, W, R,
B, initial_h, initial_c and P are all checked. Outputs whose name starts with '_' are not
read (their gradient is zero)."""
from . import op_model

T, B, I, H = 3, 2, 3, 4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_case(op, direction="forward", layout=0, bias=True, h0=True, c0=True, peep=False,
             outputs=None, opset=17, **attrs):
    g, d = GATES[op], 2 if direction == "bidirectional" else 1
    state = [B, d, H] if layout else [d, B, H]
    inputs = [
        ("x", [B, T, I] if layout else [T, B, I]),
        ("w", [d, g * H, I]),
        ("r", [d, g * H, H]),
        ("b", [d, 2 * g * H]) if bias else None,
        None,  # sequence_lens
        ("h0", state) if h0 else None,
    ]
    if op == "LSTM":
        inputs += [("c0", state) if c0 else None, ("p", [d, 3 * H]) if peep else None]
    while inputs[-1] is None:
        inputs.pop()
    a = {"hidden_size": H, **attrs}
    if direction != "forward":
        a["direction"] = direction
    if layout:
        a["layout"] = 1
    outs = outputs or (["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"])
    return op_model(op, inputs, a, outputs=outs, opset=opset)


CASES = [
    ("RNN_forward", rnn_case("RNN")),
    ("RNN_reverse_plain", rnn_case("RNN", "reverse", bias=False, h0=False)),
    ("RNN_bidirectional_layout1", rnn_case("RNN", "bidirectional", layout=1)),
    ("RNN_relu_only_yh", rnn_case("RNN", outputs=["_y", "yh"], activations=["Relu"])),
    ("RNN_sigmoid_bidirectional", rnn_case("RNN", "bidirectional", outputs=["y", "_yh"],
                                           activations=["Sigmoid", "Tanh"])),
    ("RNN_opset13", rnn_case("RNN", "reverse", opset=13)),
    ("GRU_forward", rnn_case("GRU")),
    ("GRU_forward_lbr", rnn_case("GRU", linear_before_reset=1)),
    ("GRU_reverse_lbr_plain", rnn_case("GRU", "reverse", bias=False, h0=False,
                                       linear_before_reset=1)),
    ("GRU_reverse_plain_only_y", rnn_case("GRU", "reverse", bias=False, h0=False,
                                          outputs=["y", "_yh"])),
    ("GRU_bidirectional_layout1", rnn_case("GRU", "bidirectional", layout=1)),
    ("GRU_bidirectional_lbr_only_yh", rnn_case("GRU", "bidirectional", outputs=["_y", "yh"],
                                               linear_before_reset=1)),
    ("GRU_lbr_layout1", rnn_case("GRU", "reverse", layout=1, linear_before_reset=1)),
    ("GRU_activations", rnn_case("GRU", "bidirectional",
                                 activations=["Sigmoid", "Relu", "Tanh", "Sigmoid"])),
    ("LSTM_forward", rnn_case("LSTM")),
    ("LSTM_reverse_plain", rnn_case("LSTM", "reverse", bias=False, h0=False, c0=False)),
    ("LSTM_bidirectional_peepholes", rnn_case("LSTM", "bidirectional", peep=True)),
    ("LSTM_layout1_bidirectional", rnn_case("LSTM", "bidirectional", layout=1, peep=True)),
    ("LSTM_layout1_only_y", rnn_case("LSTM", "reverse", layout=1, outputs=["y", "_yh", "_yc"])),
    ("LSTM_only_yc", rnn_case("LSTM", outputs=["_y", "_yh", "yc"], peep=True)),
    ("LSTM_only_yh_no_c0", rnn_case("LSTM", "reverse", c0=False, outputs=["_y", "yh"])),
    ("LSTM_activations", rnn_case("LSTM", activations=["Tanh", "Sigmoid", "Relu"])),
    ("LSTM_opset21_bidirectional", rnn_case("LSTM", "bidirectional", opset=21, peep=True)),
    ("GRU_opset18_bidirectional_lbr", rnn_case("GRU", "bidirectional", opset=18,
                                               linear_before_reset=1)),
]
