"""``mx.viz``: layer summaries and network plots, checked against MXNet 1.9.1's output.

Summary tables are written with a ``|`` after the last column of every line so that the
trailing spaces MXNet prints stay visible; ``_table`` removes it.
"""

import builtins
import warnings

import pytest
import rsmx as mx


def _table(text: str) -> str:
    """The printed text of a summary table written with a ``|`` ending each line."""
    lines = text.strip("\n").split("\n")
    assert all(line.endswith("|") for line in lines)
    return "".join(line[:-1] + "\n" for line in lines)


def _dot(statements: list[str], title: str = "plot") -> str:
    """DOT source of a digraph with the given body statements."""
    return f"digraph {title} {{\n" + "".join(f"\t{s}\n" for s in statements) + "}\n"


def mlp():
    net = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data=net, name="fc1", num_hidden=128)
    net = mx.sym.Activation(data=net, name="relu1", act_type="relu")
    net = mx.sym.FullyConnected(data=net, name="fc2", num_hidden=64, no_bias=True)
    net = mx.sym.Activation(data=net, name="relu2", act_type="relu")
    net = mx.sym.FullyConnected(data=net, name="fc3", num_hidden=10)
    return mx.sym.SoftmaxOutput(data=net, name="softmax")


def convnet():
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, name="conv1", kernel=(5, 5), num_filter=20)
    net = mx.sym.BatchNorm(net, name="bn1")
    net = mx.sym.Activation(net, name="relu1", act_type="relu")
    net = mx.sym.Pooling(net, name="pool1", kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.Convolution(
        net,
        name="conv2",
        kernel=(3, 3),
        stride=(2, 2),
        pad=(1, 1),
        num_filter=32,
        num_group=4,
        no_bias=True,
    )
    net = mx.sym.Activation(net, name="tanh1", act_type="tanh")
    net = mx.sym.Pooling(net, name="pool2", kernel=(2, 2), pool_type="avg", global_pool=True)
    net = mx.sym.Flatten(net, name="flat")
    net = mx.sym.FullyConnected(net, name="fc", num_hidden=10)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def branches():
    data = mx.sym.Variable("data")
    left = mx.sym.FullyConnected(data, name="left", num_hidden=16)
    right = mx.sym.FullyConnected(data, name="right", num_hidden=16)
    added = mx.sym.elemwise_add(left, right, name="add")
    prod = mx.sym.elemwise_mul(added, left, name="mul")
    act = mx.sym.Activation(prod, name="act", act_type="sigmoid")
    cat = mx.sym.Concat(act, right, dim=1, name="cat")
    return mx.sym.FullyConnected(cat, name="out", num_hidden=4)


MLP_SHAPE = {"data": (100, 200)}
CONVNET_SHAPE = {"data": (8, 3, 28, 28)}
BRANCHES_SHAPE = {"data": (2, 8)}


MLP_SUMMARY = _table(
    """
________________________________________________________________________________________________________________________|
Layer (type)                                        Output Shape            Param #     Previous Layer                  |
========================================================================================================================|
data(null)                                          200                     0                                           |
________________________________________________________________________________________________________________________|
fc1(FullyConnected)                                 128                     25728       data                            |
________________________________________________________________________________________________________________________|
relu1(Activation)                                   128                     0           fc1                             |
________________________________________________________________________________________________________________________|
fc2(FullyConnected)                                 64                      8192        relu1                           |
________________________________________________________________________________________________________________________|
relu2(Activation)                                   64                      0           fc2                             |
________________________________________________________________________________________________________________________|
fc3(FullyConnected)                                 10                      650         relu2                           |
________________________________________________________________________________________________________________________|
softmax(SoftmaxOutput)                              10                      0           fc3                             |
========================================================================================================================|
Total params: 34570|
________________________________________________________________________________________________________________________|
"""
)


MLP_SUMMARY_NO_SHAPE = _table(
    """
________________________________________________________________________________________________________________________|
Layer (type)                                        Output Shape            Param #     Previous Layer                  |
========================================================================================================================|
data(null)                                                                  0                                           |
________________________________________________________________________________________________________________________|
fc1(FullyConnected)                                                         128         data                            |
________________________________________________________________________________________________________________________|
relu1(Activation)                                                           0           fc1                             |
________________________________________________________________________________________________________________________|
fc2(FullyConnected)                                                         0           relu1                           |
________________________________________________________________________________________________________________________|
relu2(Activation)                                                           0           fc2                             |
________________________________________________________________________________________________________________________|
fc3(FullyConnected)                                                         10          relu2                           |
________________________________________________________________________________________________________________________|
softmax(SoftmaxOutput)                                                      0           fc3                             |
========================================================================================================================|
Total params: 138|
________________________________________________________________________________________________________________________|
"""
)


CONVNET_SUMMARY = _table(
    """
________________________________________________________________________________________________________________________|
Layer (type)                                        Output Shape            Param #     Previous Layer                  |
========================================================================================================================|
data(null)                                          3x28x28                 0                                           |
________________________________________________________________________________________________________________________|
conv1(Convolution)                                  20x24x24                1520        data                            |
________________________________________________________________________________________________________________________|
bn1(BatchNorm)                                      20x24x24                40          conv1                           |
________________________________________________________________________________________________________________________|
relu1(Activation)                                   20x24x24                0           bn1                             |
________________________________________________________________________________________________________________________|
pool1(Pooling)                                      20x12x12                0           relu1                           |
________________________________________________________________________________________________________________________|
conv2(Convolution)                                  32x6x6                  1440        pool1                           |
________________________________________________________________________________________________________________________|
tanh1(Activation)                                   32x6x6                  0           conv2                           |
________________________________________________________________________________________________________________________|
pool2(Pooling)                                      32x1x1                  0           tanh1                           |
________________________________________________________________________________________________________________________|
flat(Flatten)                                       32                      0           pool2                           |
________________________________________________________________________________________________________________________|
fc(FullyConnected)                                  10                      330         flat                            |
________________________________________________________________________________________________________________________|
softmax(SoftmaxOutput)                              10                      0           fc                              |
========================================================================================================================|
Total params: 3330|
________________________________________________________________________________________________________________________|
"""
)


CONVNET_SUMMARY_NO_SHAPE = _table(
    """
________________________________________________________________________________________________________________________|
Layer (type)                                        Output Shape            Param #     Previous Layer                  |
========================================================================================================================|
data(null)                                                                  0                                           |
________________________________________________________________________________________________________________________|
conv1(Convolution)                                                          20          data                            |
________________________________________________________________________________________________________________________|
bn1(BatchNorm)                                                              0           conv1                           |
________________________________________________________________________________________________________________________|
relu1(Activation)                                                           0           bn1                             |
________________________________________________________________________________________________________________________|
pool1(Pooling)                                                              0           relu1                           |
________________________________________________________________________________________________________________________|
conv2(Convolution)                                                          0           pool1                           |
________________________________________________________________________________________________________________________|
tanh1(Activation)                                                           0           conv2                           |
________________________________________________________________________________________________________________________|
pool2(Pooling)                                                              0           tanh1                           |
________________________________________________________________________________________________________________________|
flat(Flatten)                                                               0           pool2                           |
________________________________________________________________________________________________________________________|
fc(FullyConnected)                                                          10          flat                            |
________________________________________________________________________________________________________________________|
softmax(SoftmaxOutput)                                                      0           fc                              |
========================================================================================================================|
Total params: 30|
________________________________________________________________________________________________________________________|
"""
)


BRANCHES_SUMMARY = _table(
    """
________________________________________________________________________________________________________________________|
Layer (type)                                        Output Shape            Param #     Previous Layer                  |
========================================================================================================================|
data(null)                                          8                       0                                           |
________________________________________________________________________________________________________________________|
left(FullyConnected)                                16                      144         data                            |
________________________________________________________________________________________________________________________|
right(FullyConnected)                               16                      144         data                            |
________________________________________________________________________________________________________________________|
add(elemwise_add)                                   16                      0           left                            |
                                                                                        right                           |
________________________________________________________________________________________________________________________|
mul(elemwise_mul)                                   16                      0           add                             |
                                                                                        left                            |
________________________________________________________________________________________________________________________|
act(Activation)                                     16                      0           mul                             |
________________________________________________________________________________________________________________________|
cat(Concat)                                         32                      0           act                             |
                                                                                        right                           |
________________________________________________________________________________________________________________________|
out(FullyConnected)                                 4                       132         cat                             |
========================================================================================================================|
Total params: 420|
________________________________________________________________________________________________________________________|
"""
)


MLP_SUMMARY_NARROW = _table(
    """
________________________________________|
Layer (type)     Output SParaPrevious La|
========================================|
data(null)       200     0              |
________________________________________|
fc1(FullyConnecte128     2572data       |
________________________________________|
relu1(Activation)128     0   fc1        |
________________________________________|
fc2(FullyConnecte64      8192relu1      |
________________________________________|
relu2(Activation)64      0   fc2        |
________________________________________|
fc3(FullyConnecte10      650 relu2      |
________________________________________|
softmax(SoftmaxOu10      0   fc3        |
========================================|
Total params: 34570|
________________________________________|
"""
)


BRANCHES_SUMMARY_ABSOLUTE = _table(
    """
________________________________________________________________|
Layer (type)            Output Shape    Param # Previous Layer  |
================================================================|
data(null)                              0                       |
________________________________________________________________|
left(FullyConnected)                    16      data            |
________________________________________________________________|
right(FullyConnected)                   16      data            |
________________________________________________________________|
add(elemwise_add)                       0       left            |
                                                right           |
________________________________________________________________|
mul(elemwise_mul)                       0       add             |
                                                left            |
________________________________________________________________|
act(Activation)                         0       mul             |
________________________________________________________________|
cat(Concat)                             0       act             |
                                                right           |
________________________________________________________________|
out(FullyConnected)                     4       cat             |
================================================================|
Total params: 36|
________________________________________________________________|
"""
)


MLP_DOT = [
    'data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]',
    'fc1 [label="FullyConnected\n128" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'relu1 [label="Activation\nrelu" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'fc2 [label="FullyConnected\n64" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'relu2 [label="Activation\nrelu" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'fc3 [label="FullyConnected\n10" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'softmax_label [label=softmax_label fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]',
    'softmax [label=softmax fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    "fc1 -> data [label=200 arrowtail=open dir=back]",
    "relu1 -> fc1 [label=128 arrowtail=open dir=back]",
    "fc2 -> relu1 [label=128 arrowtail=open dir=back]",
    "relu2 -> fc2 [label=64 arrowtail=open dir=back]",
    "fc3 -> relu2 [label=64 arrowtail=open dir=back]",
    "softmax -> fc3 [label=10 arrowtail=open dir=back]",
    'softmax -> softmax_label [label="" arrowtail=open dir=back]',
]

CONVNET_DOT = [
    'data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]',
    'conv1 [label="Convolution\n5x5/1, 20" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'bn1 [label=bn1 fillcolor="#bebada" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'relu1 [label="Activation\nrelu" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'pool1 [label="Pooling\nmax, 2x2/2x2" fillcolor="#80b1d3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'conv2 [label="Convolution\n3x3/2x2, 32" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'tanh1 [label="Activation\ntanh" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'pool2 [label="Pooling\navg, 2x2/1" fillcolor="#80b1d3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'flat [label=flat fillcolor="#fdb462" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'fc [label="FullyConnected\n10" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'softmax_label [label=softmax_label fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]',
    'softmax [label=softmax fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'conv1 -> data [label="3x28x28" arrowtail=open dir=back]',
    'bn1 -> conv1 [label="20x24x24" arrowtail=open dir=back]',
    'relu1 -> bn1 [label="20x24x24" arrowtail=open dir=back]',
    'pool1 -> relu1 [label="20x24x24" arrowtail=open dir=back]',
    'conv2 -> pool1 [label="20x12x12" arrowtail=open dir=back]',
    'tanh1 -> conv2 [label="32x6x6" arrowtail=open dir=back]',
    'pool2 -> tanh1 [label="32x6x6" arrowtail=open dir=back]',
    'flat -> pool2 [label="32x1x1" arrowtail=open dir=back]',
    "fc -> flat [label=32 arrowtail=open dir=back]",
    "softmax -> fc [label=10 arrowtail=open dir=back]",
    'softmax -> softmax_label [label="" arrowtail=open dir=back]',
]

BRANCHES_DOT = [
    'data [label=data fillcolor="#8dd3c7" fixedsize=true height=0.8034 shape=oval style=filled width=1.3]',
    'left [label="FullyConnected\n16" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'right [label="FullyConnected\n16" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'add [label=add fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'mul [label=mul fillcolor="#fccde5" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'act [label="Activation\nsigmoid" fillcolor="#ffffb3" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'cat [label=cat fillcolor="#fdb462" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    'out [label="FullyConnected\n4" fillcolor="#fb8072" fixedsize=true height=0.8034 shape=box style=filled width=1.3]',
    "left -> data [label=8 arrowtail=open dir=back]",
    "right -> data [label=8 arrowtail=open dir=back]",
    "add -> left [label=16 arrowtail=open dir=back]",
    "add -> right [label=16 arrowtail=open dir=back]",
    "mul -> add [label=16 arrowtail=open dir=back]",
    "mul -> left [label=16 arrowtail=open dir=back]",
    "act -> mul [label=16 arrowtail=open dir=back]",
    "cat -> act [label=16 arrowtail=open dir=back]",
    "cat -> right [label=16 arrowtail=open dir=back]",
    "out -> cat [label=32 arrowtail=open dir=back]",
]


@pytest.fixture
def no_graphviz(monkeypatch):
    """Makes ``import graphviz`` fail."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "graphviz" or name.startswith("graphviz."):
            raise ImportError("No module named 'graphviz'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def _summary(capsys, symbol, **kwargs) -> str:
    mx.viz.print_summary(symbol, **kwargs)
    return capsys.readouterr().out


def test_viz_is_the_visualization_module():
    assert mx.viz is mx.visualization
    assert mx.viz.print_summary is mx.visualization.print_summary


@pytest.mark.parametrize(
    ("make", "shape", "expected"),
    [
        (mlp, MLP_SHAPE, MLP_SUMMARY),
        (mlp, None, MLP_SUMMARY_NO_SHAPE),
        (convnet, CONVNET_SHAPE, CONVNET_SUMMARY),
        (convnet, None, CONVNET_SUMMARY_NO_SHAPE),
        (branches, BRANCHES_SHAPE, BRANCHES_SUMMARY),
    ],
    ids=["mlp", "mlp-no-shape", "convnet", "convnet-no-shape", "branches"],
)
def test_print_summary_matches_mxnet(capsys, make, shape, expected):
    assert _summary(capsys, make(), shape=shape) == expected


def test_print_summary_cuts_fields_to_narrow_columns(capsys):
    assert _summary(capsys, mlp(), shape=MLP_SHAPE, line_length=40) == MLP_SUMMARY_NARROW


def test_print_summary_absolute_positions(capsys):
    text = _summary(capsys, branches(), line_length=64, positions=[24, 40, 48, 64])
    assert text == BRANCHES_SUMMARY_ABSOLUTE


def test_print_summary_of_a_variable(capsys):
    text = _summary(capsys, mx.sym.Variable("a"), shape={"a": (3, 4)}, line_length=40)
    assert text == _table(
        """
________________________________________|
Layer (type)     Output SParaPrevious La|
========================================|
a(null)          4       0              |
========================================|
Total params: 0|
________________________________________|
"""
    )


def test_print_summary_rejects_bad_input():
    with pytest.raises(TypeError):
        mx.viz.print_summary("data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="incomplete"):
            mx.viz.print_summary(mlp(), shape={})


@pytest.mark.parametrize(
    ("make", "shape", "statements"),
    [
        (mlp, MLP_SHAPE, MLP_DOT),
        (convnet, CONVNET_SHAPE, CONVNET_DOT),
        (branches, BRANCHES_SHAPE, BRANCHES_DOT),
    ],
    ids=["mlp", "convnet", "branches"],
)
def test_plot_network_dot_text_without_graphviz(no_graphviz, make, shape, statements):
    dot = mx.viz.plot_network(make(), shape=shape)
    assert isinstance(dot, str)
    assert dot == _dot(statements)


def test_plot_network_shows_weights_on_request(no_graphviz):
    dot = mx.viz.plot_network(mlp(), title="net", hide_weights=False)
    assert dot.startswith("digraph net {\n")
    assert '\tfc1 -> fc1_weight [label="" arrowtail=open dir=back]\n' in dot
    assert '\tfc1 -> fc1_bias [label="" arrowtail=open dir=back]\n' in dot
    assert '\tfc2 -> fc2_weight [label="" arrowtail=open dir=back]\n' in dot
    # Weights have edges but no node statements of their own.
    assert "\tfc1_weight [" not in dot
    hidden = mx.viz.plot_network(mlp())
    assert "fc1_weight" not in hidden and "fc1_bias" not in hidden


def test_plot_network_batch_norm_parameters_are_hidden(no_graphviz):
    dot = mx.viz.plot_network(convnet())
    for name in ("bn1_gamma", "bn1_beta", "bn1_moving_mean", "bn1_moving_var", "conv1_weight"):
        assert name not in dot
    assert '\tbn1 -> conv1 [label="" arrowtail=open dir=back]\n' in dot


def test_plot_network_labels_edges_with_types(no_graphviz):
    dot = mx.viz.plot_network(mlp(), shape=MLP_SHAPE, dtype={"data": "float32"})
    assert '\tfc1 -> data [label="200(float32)" arrowtail=open dir=back]\n' in dot
    assert '\tsoftmax -> softmax_label [label="(float32)" arrowtail=open dir=back]\n' in dot


def test_plot_network_node_attrs_and_quoting(no_graphviz):
    data = mx.sym.Variable("my data")
    net = mx.sym.LeakyReLU(data, name='q"uo\\te')
    net = mx.sym.elemwise_add(net, data, name="graph")
    dot = mx.viz.plot_network(
        net, title="digraph", node_attrs={"width": "2", "color": "<red>"}, shape={"my data": (2, 3)}
    )
    assert dot == _dot(
        [
            '"my data" [label="my data" color=<red> fillcolor="#8dd3c7" fixedsize=true '
            "height=0.8034 shape=oval style=filled width=2]",
            '"q\\"uo\\te" [label="LeakyReLU\nLeaky" color=<red> fillcolor="#ffffb3" '
            "fixedsize=true height=0.8034 shape=box style=filled width=2]",
            '"graph" [label="graph" color=<red> fillcolor="#fccde5" fixedsize=true '
            "height=0.8034 shape=box style=filled width=2]",
            '"q\\"uo\\te" -> "my data" [label=3 arrowtail=open dir=back]',
            '"graph" -> "q\\"uo\\te" [label=3 arrowtail=open dir=back]',
            '"graph" -> "my data" [label=3 arrowtail=open dir=back]',
        ],
        title='"digraph"',
    )


def test_plot_network_warns_on_repeated_names(no_graphviz):
    net = mx.sym.elemwise_add(mx.sym.Variable("a"), mx.sym.Variable("a"), name="a")
    with pytest.warns(RuntimeWarning, match="Repeated names: a"):
        dot = mx.viz.plot_network(net)
    assert dot.count("\ta -> a [") == 2


def test_plot_network_rejects_bad_input(no_graphviz):
    with pytest.raises(TypeError):
        mx.viz.plot_network("data")


def test_plot_network_returns_a_digraph_with_graphviz():
    import graphviz  # a test dependency: this test must run, not skip
    dot = mx.viz.plot_network(mlp(), shape=MLP_SHAPE, save_format="png")
    assert isinstance(dot, graphviz.Digraph)
    assert dot.format == "png"
    assert dot.source == _dot(MLP_DOT)
