"""swansim: a discrete-event simulator of smartphone SoCs training DNNs in the background."""
__version__ = "0.1.0"
