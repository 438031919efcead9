"""The allowlist: what code may do and still be rated "low". Data only; the provers that apply it are
safety/python/proof.py and safety/shell/proof.py, and docs/security.md defends every entry.

"Low" is proven, not guessed: every operation in the code must be on this list (pure computation and
display, reading files proven inside the workspace, writing data and figure files proven inside it, and the
named modules, functions and commands below with the arguments said). Anything else is at least "medium",
whatever it is; the risk rules (rules.py, python/, shell/) then tell medium from high and write the reasons.
"""

from __future__ import annotations

import sys

# --- Python ----------------------------------------------------------------------------------------------

# Builtins that only compute or display. Not here: open (checked: read, or write a data file, inside the
# workspace), eval/exec/compile/__import__/getattr/setattr/delattr/globals/locals/vars (code or names chosen at
# run time), input/breakpoint/help (wait on a person), exit/quit, memoryview (raw memory).
BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "print",
    "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "super", "tuple", "type",
    "zip", "classmethod", "staticmethod", "property", "hasattr", "display", "aiter", "anext",
    # exceptions and constants are values, not operations
    "Exception", "ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "StopIteration",
    "ZeroDivisionError", "AttributeError", "NotImplementedError", "ArithmeticError", "AssertionError",
    "LookupError", "OverflowError", "FileNotFoundError", "ImportError", "ModuleNotFoundError", "Warning",
    "UserWarning", "DeprecationWarning", "FutureWarning", "RuntimeWarning", "NotImplemented", "Ellipsis",
    "True", "False", "None", "BaseException", "KeyboardInterrupt", "OSError", "IOError",
})

# Modules whose every public name (not starting with "_", not the name of a module: `statistics.sys` is
# not `statistics`) only computes: no files, no network, no processes, no code from strings.
PURE_MODULES = frozenset({
    "math", "cmath", "statistics", "fractions", "decimal", "numbers", "random", "itertools", "collections",
    "collections.abc", "heapq", "bisect", "string", "textwrap", "re", "datetime", "calendar", "enum",
    "dataclasses", "typing", "abc", "copy", "pprint", "uuid", "hashlib", "hmac", "base64", "binascii",
    "zlib", "unicodedata", "difflib", "array", "struct", "secrets", "json", "csv", "numpy.linalg",
    "numpy.random", "numpy.fft", "numpy.polynomial", "numpy.ma", "scipy.stats", "scipy.optimize",
    "scipy.special", "scipy.linalg", "scipy.interpolate", "scipy.integrate", "scipy.signal", "scipy.spatial",
    "scipy.cluster", "scipy.ndimage", "sklearn.model_selection", "sklearn.preprocessing",
    "sklearn.linear_model", "sklearn.ensemble", "sklearn.tree", "sklearn.svm", "sklearn.neighbors",
    "sklearn.cluster", "sklearn.decomposition", "sklearn.metrics", "sklearn.pipeline", "sklearn.compose",
    "sklearn.impute", "sklearn.feature_selection", "sklearn.naive_bayes", "sklearn.neural_network",
    "sklearn.manifold", "sklearn.mixture", "sklearn.inspection", "sklearn.calibration",
    "sklearn.discriminant_analysis", "sklearn.kernel_ridge", "sklearn.multiclass", "sklearn.multioutput",
    "sklearn.dummy", "sklearn.feature_extraction", "sklearn.feature_extraction.text", "sklearn.semi_supervised",
    "sklearn.covariance", "sklearn.cross_decomposition", "sklearn.gaussian_process", "sklearn.isotonic",
    "sklearn.random_projection", "sklearn.base", "sklearn.exceptions",
})
# Names of those modules that write or fetch after all: checked like the functions below.
PURE_MODULE_EXCEPTIONS = frozenset({"sklearn.tree.export_graphviz", "json.load", "json.dump", "csv.writer",
                                    "random.SystemRandom"})

# Modules with a named subset: only these names (and the submodules listed as modules here).
NAMED = {
    "time": {"time", "perf_counter", "monotonic", "sleep", "strftime", "localtime", "gmtime", "process_time",
             "time_ns", "perf_counter_ns", "strptime", "mktime", "ctime", "asctime"},
    "functools": {"reduce", "partial", "lru_cache", "cache", "wraps", "cmp_to_key", "total_ordering",
                  "cached_property", "singledispatch"},
    "operator": {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "eq", "ne",
                 "lt", "le", "gt", "ge", "not_", "and_", "or_", "xor", "itemgetter", "contains", "concat",
                 "index", "matmul", "invert", "truth", "countOf", "indexOf"},
    "io": {"StringIO", "BytesIO"},
    # Facts about this Python and machine (os.uname; platform.processor and architecture, which can run
    # programs, are not here).
    "platform": {"python_version", "python_version_tuple", "system", "machine", "node", "release", "version",
                 "python_implementation", "platform"},
    "sys": {"version", "version_info", "platform", "maxsize", "byteorder", "float_info", "int_info",
            "getrecursionlimit", "getsizeof", "implementation"},
    "warnings": {"filterwarnings", "simplefilter", "warn", "catch_warnings", "resetwarnings"},
    "contextlib": {"suppress", "redirect_stdout", "redirect_stderr", "nullcontext", "contextmanager",
                   "closing"},
    "os": {"getcwd", "listdir", "scandir", "makedirs", "mkdir", "cpu_count", "sep", "linesep", "curdir",
           "pardir", "extsep", "walk"},
    "os.path": {"join", "basename", "dirname", "splitext", "split", "exists", "isfile", "isdir", "getsize",
                "getmtime", "abspath", "normpath", "relpath", "isabs", "commonpath", "sep"},
    "glob": {"glob", "iglob"},
    "pathlib": {"Path", "PurePath", "PurePosixPath", "PosixPath"},
    "tqdm": {"tqdm", "trange"}, "tqdm.auto": {"tqdm", "trange"}, "tqdm.notebook": {"tqdm", "trange"},
    "IPython.display": {"display", "Markdown", "Math", "Latex", "clear_output", "JSON", "Pretty", "Image"},
    # Pillow: images made in memory or read from the workspace (Image.open: checked); `.save` is a writer.
    "PIL": {"Image"},
    "PIL.Image": {"new", "fromarray", "frombytes", "linear_gradient", "radial_gradient", "open", "merge",
                  "blend", "composite", "NEAREST", "BILINEAR", "BICUBIC", "LANCZOS", "Resampling"},
    "IPython": {"display"},
    "numpy": {
        # creation
        "array", "asarray", "asanyarray", "zeros", "ones", "empty", "full", "zeros_like", "ones_like",
        "empty_like", "full_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity", "diag",
        "diagflat", "tri", "tril", "triu", "meshgrid", "mgrid", "ogrid", "fromfunction", "fromiter", "copy",
        "frombuffer", "fromstring",
        # shape
        "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze", "concatenate",
        "stack", "vstack", "hstack", "dstack", "column_stack", "row_stack", "split", "array_split", "hsplit",
        "vsplit", "tile", "repeat", "flip", "fliplr", "flipud", "roll", "rot90", "append", "insert", "delete",
        "resize", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_to", "broadcast_arrays", "pad",
        # maths
        "sum", "prod", "cumsum", "cumprod", "mean", "median", "average", "std", "var", "min", "max", "amin",
        "amax", "argmin", "argmax", "ptp", "percentile", "quantile", "nanmean", "nanmedian", "nanstd",
        "nanvar", "nansum", "nanmin", "nanmax", "nanargmin", "nanargmax", "nanpercentile", "nanquantile",
        "nancumsum", "nanprod", "abs", "absolute", "sqrt", "square", "exp", "exp2", "expm1", "log", "log2",
        "log10", "log1p", "power", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh",
        "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees", "radians", "hypot",
        "floor", "ceil", "trunc", "round", "around", "rint", "fix", "sign", "clip", "maximum", "minimum",
        "fmax", "fmin", "mod", "fmod", "remainder", "divmod", "add", "subtract", "multiply", "divide",
        "true_divide", "floor_divide", "negative", "reciprocal", "dot", "vdot", "inner", "outer", "matmul",
        "tensordot", "einsum", "kron", "cross", "trace", "diff", "ediff1d", "gradient", "convolve",
        "correlate", "corrcoef", "cov", "histogram", "histogram2d", "histogramdd", "bincount", "digitize",
        "interp", "polyfit", "polyval", "poly1d", "roots", "trapz", "trapezoid", "real", "imag",
        "conj", "conjugate", "angle", "gcd", "lcm", "isclose", "allclose", "array_equal", "isnan", "isinf",
        "isfinite", "isneginf", "isposinf", "nan_to_num", "logical_and", "logical_or", "logical_not",
        "logical_xor", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "all", "any",
        "where", "select", "choose", "piecewise", "nonzero", "argwhere", "flatnonzero", "count_nonzero",
        "sort", "argsort", "lexsort", "partition", "argpartition", "searchsorted", "unique", "in1d", "isin",
        "intersect1d", "union1d", "setdiff1d", "setxor1d", "take", "take_along_axis", "put_along_axis",
        "put", "place", "extract", "compress", "cumulative_sum", "vectorize", "apply_along_axis",
        "ndenumerate", "ndindex", "unravel_index", "ravel_multi_index", "indices", "triu_indices",
        "tril_indices", "diag_indices", "finfo", "iinfo", "shape", "ndim", "size", "result_type",
        "promote_types", "can_cast", "issubdtype", "dtype", "ndarray", "set_printoptions", "get_printoptions",
        "printoptions", "seterr", "errstate", "array2string", "array_repr", "array_str", "format_float_positional",
        "format_float_scientific", "isscalar", "iscomplexobj", "isrealobj", "sinc", "heaviside", "signbit",
        "copysign", "nextafter", "spacing", "ldexp", "frexp", "modf", "cbrt", "float_power", "logaddexp",
        "logaddexp2", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
        "packbits", "unpackbits", "datetime64", "timedelta64", "busday_count", "is_busday", "busday_offset",
        "char", "emath",
        # types and constants
        "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "float16", "float32", "float64", "float128",
        "longdouble", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "intp",
        "uintp", "bool_", "complex64", "complex128", "object_", "str_", "bytes_", "int_", "float_",
        "complex_", "number", "integer", "floating", "complexfloating", "generic", "random", "linalg", "fft",
        "polynomial", "ma", "typing", "NaN", "NAN", "Inf", "PINF", "NINF",
        # I/O: checked (a path proven inside the workspace; np.load without allow_pickle)
        "load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
    },
    "pandas": {
        "DataFrame", "Series", "Index", "MultiIndex", "RangeIndex", "CategoricalIndex", "DatetimeIndex",
        "Categorical", "CategoricalDtype", "Timestamp", "Timedelta", "Period", "Interval", "DateOffset", "NA",
        "NaT", "concat", "merge", "merge_asof", "merge_ordered", "pivot", "pivot_table", "crosstab", "cut",
        "qcut", "get_dummies", "from_dummies", "factorize", "unique", "melt", "wide_to_long", "to_datetime",
        "to_numeric", "to_timedelta", "date_range", "period_range", "timedelta_range", "interval_range",
        "bdate_range", "isna", "isnull", "notna", "notnull", "set_option", "get_option", "option_context",
        "reset_option", "options", "array", "Grouper", "NamedAgg", "IndexSlice", "api", "api.types",
        "Int64Dtype", "Float64Dtype", "StringDtype", "BooleanDtype", "infer_freq", "value_counts", "offsets",
        # readers: checked (a path proven inside the workspace or an in-memory buffer; never a URL)
        "read_csv", "read_table", "read_parquet", "read_json", "read_excel", "read_feather", "read_fwf",
    },
    "pandas.api.types": {"is_numeric_dtype", "is_string_dtype", "is_datetime64_any_dtype", "is_bool_dtype",
                         "is_categorical_dtype", "is_integer_dtype", "is_float_dtype", "is_object_dtype",
                         "CategoricalDtype", "infer_dtype", "is_list_like", "is_scalar"},
    "matplotlib": {"pyplot", "cm", "colors", "ticker", "dates", "patches", "lines", "gridspec", "rcParams",
                   "colormaps", "style", "figure", "axes"},
    "matplotlib.pyplot": {
        "figure", "subplots", "subplot", "subplot2grid", "subplot_mosaic", "plot", "scatter", "bar", "barh",
        "hist", "hist2d", "boxplot", "violinplot", "pie", "imshow", "contour", "contourf", "pcolormesh",
        "pcolor", "errorbar", "fill_between", "fill_betweenx", "fill", "axhline", "axvline", "axhspan",
        "axvspan", "hlines", "vlines", "title", "suptitle", "xlabel", "ylabel", "xlim", "ylim", "xticks",
        "yticks", "xscale", "yscale", "legend", "grid", "tight_layout", "show", "close", "clf", "cla", "gca",
        "gcf", "colorbar", "text", "annotate", "figtext", "stem", "step", "stackplot", "semilogx",
        "semilogy", "loglog", "polar", "quiver", "streamplot", "hexbin", "matshow", "spy", "twinx", "twiny",
        "axis", "margins", "subplots_adjust", "tick_params", "ticklabel_format", "locator_params",
        "minorticks_on", "minorticks_off", "box", "clim", "draw", "ion", "ioff", "get_cmap", "colormaps",
        "cm", "rcParams", "style", "eventplot", "ecdf", "broken_barh", "table", "sca", "setp", "axes",
        "pause", "scatter3D",
        # checked: figures saved inside the workspace, images read from it
        "savefig", "imread", "imsave",
    },
    "matplotlib.style": {"use", "context", "available"},
    "matplotlib.colors": {"Normalize", "LogNorm", "ListedColormap", "LinearSegmentedColormap", "to_hex",
                          "to_rgb", "to_rgba", "TwoSlopeNorm", "BoundaryNorm"},
    "matplotlib.ticker": {"MaxNLocator", "MultipleLocator", "FuncFormatter", "PercentFormatter",
                          "StrMethodFormatter", "FormatStrFormatter", "AutoMinorLocator", "LogLocator"},
    "matplotlib.dates": {"DateFormatter", "AutoDateLocator", "DayLocator", "MonthLocator", "YearLocator",
                         "date2num", "num2date", "WeekdayLocator", "HourLocator", "ConciseDateFormatter"},
    "matplotlib.patches": {"Rectangle", "Circle", "Patch", "Polygon", "Ellipse", "FancyBboxPatch", "Wedge"},
    "matplotlib.lines": {"Line2D"},
    "matplotlib.gridspec": {"GridSpec", "GridSpecFromSubplotSpec"},
    "matplotlib.cm": {"get_cmap", "ScalarMappable", "viridis", "plasma", "coolwarm", "jet", "tab10"},
    "seaborn": {
        "set", "set_theme", "set_style", "set_context", "set_palette", "color_palette", "heatmap", "histplot",
        "kdeplot", "scatterplot", "lineplot", "barplot", "boxplot", "violinplot", "countplot", "pairplot",
        "jointplot", "regplot", "lmplot", "displot", "catplot", "relplot", "stripplot", "swarmplot",
        "pointplot", "clustermap", "despine", "FacetGrid", "PairGrid", "JointGrid", "ecdfplot", "rugplot",
        "residplot", "boxenplot", "diverging_palette", "light_palette", "dark_palette",
        "cubehelix_palette", "axes_style", "plotting_context", "move_legend",
    },
    "sklearn": {"set_config", "get_config", "config_context", "clone"},
    "sklearn.datasets": {"load_iris", "load_digits", "load_wine", "load_breast_cancer", "load_diabetes",
                         "load_linnerud", "make_classification", "make_regression", "make_blobs", "make_moons",
                         "make_circles", "make_friedman1", "make_s_curve", "make_swiss_roll",
                         "make_multilabel_classification", "make_sparse_spd_matrix", "make_low_rank_matrix"},
}
# Conventional names a cell uses for a module imported in an earlier cell (`np.mean` without `import numpy`).
ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "sns": "seaborn", "mpl": "matplotlib",
           "numpy": "numpy", "pandas": "pandas", "math": "math", "json": "json", "re": "re",
           "random": "random", "statistics": "statistics", "datetime": "datetime", "itertools": "itertools",
           "collections": "collections"}

# Calls checked for where they read or write: the argument that names the file, by position or keyword.
READERS = {
    "open": (0, "file"), "pathlib.Path.read_text": None, "numpy.load": (0, "file"),
    "numpy.loadtxt": (0, "fname"), "numpy.genfromtxt": (0, "fname"), "pandas.read_csv": (0, "filepath_or_buffer"),
    "pandas.read_table": (0, "filepath_or_buffer"), "pandas.read_parquet": (0, "path"),
    "pandas.read_json": (0, "path_or_buf"), "pandas.read_excel": (0, "io"), "pandas.read_feather": (0, "path"),
    "pandas.read_fwf": (0, "filepath_or_buffer"), "matplotlib.pyplot.imread": (0, "fname"),
    "json.load": (0, "fp"), "PIL.Image.open": (0, "fp"),
}
WRITERS = {
    "numpy.save": (0, "file"), "numpy.savez": (0, "file"), "numpy.savez_compressed": (0, "file"),
    "numpy.savetxt": (0, "fname"), "matplotlib.pyplot.savefig": (0, "fname"),
    "matplotlib.pyplot.imsave": (0, "fname"), "sklearn.tree.export_graphviz": (1, "out_file"),
    "json.dump": (1, "fp"),
}
# Methods that write a file named by their first argument (pandas, numpy, matplotlib): allowed for a data or
# figure file proven inside the workspace, or with no file (they then return text).
WRITER_METHODS = {
    "to_csv": "path_or_buf", "to_excel": "excel_writer", "to_parquet": "path", "to_json": "path_or_buf",
    "to_feather": "path", "to_html": "buf", "to_latex": "buf", "to_markdown": "buf", "to_string": "buf",
    "to_xml": "path_or_buffer", "savefig": "fname", "print_figure": "filename", "print_png": "filename_or_obj",
    "print_pdf": "filename_or_obj", "print_svg": "filename_or_obj", "tofile": "fid", "dump": "file",
    "to_pickle": "path", "to_hdf": "path_or_buf", "to_stata": "path", "to_orc": "path", "write_text": None,
    "write_bytes": None, "to_file": "filename", "save": "fp",
}
# Writer methods never on the list whatever the path: a pickle or HDF5 file runs code when read back, a SQL
# table is not a file, the clipboard is outside the workspace.
NEVER_WRITER_METHODS = frozenset({"to_pickle", "to_hdf", "to_sql", "to_clipboard", "to_gbq", "dump"})
# Methods that run code given as text, or reach memory or other processes, whatever object has them.
UNSAFE_METHODS = frozenset({
    "query", "eval", "system", "popen", "exec_command", "execute", "executemany", "executescript", "ctypes",
    "tofile", "to_sql", "to_clipboard", "to_gbq", "read_clipboard", "pipe_to", "spawn", "run_cell",
    "run_line_magic", "run_cell_magic", "system_raw", "getoutput", "load_ext",
})
# Method and attribute names allowed on a name this cell did not define (a value from an earlier cell: its
# type cannot be proven here, so only names that are pure on every allowlisted type, and on everything else
# the name could be, are on the list; `get`, `drop`, `delete`, `run`, `remove`, `update`... are not).
SAFE_FOREIGN_NAMES = frozenset({
    # pandas and numpy: inspect, select, compute, reshape, display
    "head", "tail", "describe", "info", "shape", "columns", "index", "dtypes", "dtype", "values", "T",
    "iloc", "loc", "at", "iat", "mean", "median", "sum", "min", "max", "std", "var", "count", "nunique",
    "unique", "value_counts", "groupby", "agg", "aggregate", "sort_values", "sort_index", "reset_index",
    "set_index", "dropna", "fillna", "isna", "isnull", "notna", "notnull", "astype", "copy", "corr", "cov",
    "cumsum", "cumprod", "diff", "pct_change", "rolling", "expanding", "ewm", "resample", "shift", "rank",
    "quantile", "round", "abs", "clip", "nlargest", "nsmallest", "idxmax", "idxmin", "any", "all", "sample",
    "duplicated", "drop_duplicates", "merge", "join", "pivot", "pivot_table", "melt", "stack", "unstack",
    "explode", "transpose", "to_numpy", "tolist", "to_list", "to_dict", "to_frame", "to_records", "plot",
    "hist", "boxplot", "str", "dt", "cat", "size", "ndim", "empty", "name", "names", "between", "isin",
    "where", "mask", "filter", "select_dtypes", "memory_usage", "equals", "nbytes", "reshape", "ravel",
    "flatten", "argmax", "argmin", "argsort", "prod", "dot", "item", "items", "keys", "squeeze",
    "mode", "skew", "kurt", "sem", "first", "last", "first_valid_index", "last_valid_index", "interpolate",
    "ffill", "bfill", "apply", "map", "transform", "assign", "style", "background_gradient", "format",
    "crosstab", "lower", "upper", "strip", "contains", "startswith", "endswith", "split", "len", "month",
    "title", "capitalize", "casefold", "swapcase", "lstrip", "rstrip", "rsplit", "partition", "rpartition",
    "extract", "extractall", "findall", "match", "fullmatch", "zfill", "pad", "center", "ljust", "rjust",
    "slice", "isdigit", "isalpha", "isnumeric", "isalnum", "isspace", "islower", "isupper", "find", "rfind",
    "repeat", "normalize", "wrap", "get_dummies", "codes", "categories",
    "year", "day", "hour", "weekday", "dayofweek", "date", "to_period", "total_seconds", "add", "sub", "mul",
    "div", "truediv", "ge", "gt", "le", "lt", "eq", "ne", "floor", "ceil", "ptp", "nonzero", "cummax",
    "cummin", "corrwith", "add_prefix", "add_suffix", "set_axis", "reindex", "align", "combine_first",
    "sort", "append", "extend", "insert",
    # sklearn estimators
    "fit", "predict", "predict_proba", "predict_log_proba", "fit_transform", "fit_predict",
    "score", "decision_function", "inverse_transform", "get_params", "set_params", "coef_", "intercept_",
    "feature_importances_", "classes_", "n_features_in_", "best_params_", "best_score_", "best_estimator_",
    "cv_results_", "labels_", "cluster_centers_", "explained_variance_ratio_", "components_", "n_iter_",
    "named_steps", "steps", "get_feature_names_out", "inertia_", "support_", "ranking_",
    # matplotlib figures and axes
    "set_title", "set_xlabel", "set_ylabel", "set_xlim", "set_ylim", "set_xticks", "set_yticks",
    "set_xticklabels", "set_yticklabels", "set_xscale", "set_yscale", "legend", "grid", "scatter", "bar",
    "barh", "imshow", "axhline", "axvline", "fill_between", "errorbar", "text", "annotate", "tight_layout",
    "suptitle", "add_subplot", "subplots_adjust", "colorbar", "set_size_inches", "twinx", "twiny",
    "tick_params", "invert_yaxis", "set_aspect", "axis", "pie", "violinplot", "contour", "contourf",
    "pcolormesh", "flat", "set_facecolor", "set_visible", "get_legend_handles_labels",
    "set_major_formatter", "set_major_locator", "xaxis", "yaxis", "spines", "tick_right", "show",
    "set_xlabels", "set_ylabels", "map_dataframe", "add_legend", "figure", "axes", "ax", "set_color",
    "set_linewidth", "label_outer", "get_xlim", "get_ylim",
})

# Files code may write and still be "low": data and figures, inside the workspace, not in a hidden
# directory (.git, .vscode, .venv ...), not a file that anything runs or reads as configuration.
DATA_SUFFIXES = frozenset({
    ".csv", ".tsv", ".txt", ".parquet", ".feather", ".arrow", ".json", ".jsonl", ".xlsx", ".xls", ".png",
    ".jpg", ".jpeg", ".svg", ".pdf", ".gif", ".webp", ".npy", ".npz", ".md", ".html", ".tex", ".dat",
    ".log", ".dot", ".eps",
})

# Names of Python modules, reached as an attribute of an allowlisted module (`matplotlib.os`,
# `statistics.sys`): never the allowlisted module's own function.
MODULE_NAMES = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "os", "sys", "subprocess", "shutil", "socket", "ctypes", "pickle", "importlib", "builtins", "np", "pd",
    "sp", "plt", "mpl", "joblib", "threadpoolctl", "pathlib", "io", "tempfile", "requests", "urllib",
}

# --- Shell -----------------------------------------------------------------------------------------------

# Commands that only print: their operands are text, not files (`echo`, `date`), with the options that
# would change the machine excluded (`date -s`, `hostname NAME`).
SHELL_TEXT_COMMANDS = frozenset({"echo", "printf", "true", "false", "pwd", "whoami", "id", "uname", "nproc",
                                 "uptime", "seq", "sleep", "expr", "basename", "dirname", "date",
                                 "hostname", "free", "lscpu", "df", "yes", "test", "[", "cal", "tty", "groups",
                                 "arch", "getconf", "locale", "lsblk"})
# Commands that read the files they name (each must be proven inside the workspace) and print.
SHELL_READ_COMMANDS = frozenset({"cat", "head", "tail", "wc", "sort", "uniq", "cut", "grep", "egrep", "fgrep",
                                 "rg", "ls", "du", "stat", "file", "md5sum", "sha1sum", "sha256sum", "diff",
                                 "cmp", "comm", "paste", "nl", "tac", "column", "tree", "find", "realpath",
                                 "readlink", "tr", "od", "hexdump", "fold", "fmt", "join", "csvlook", "mkdir"})
# Options of those that write, run a command, or read something other than the operands.
SHELL_UNSAFE_OPTIONS = {
    "sort": {"-o", "--output", "--compress-program", "-T", "--temporary-directory", "--files0-from"},
    "find": {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"},
    "rg": {"--pre", "--pre-glob", "-z", "--search-zip"},
    "grep": {"-f", "--file"},
    "date": {"-s", "--set", "-f", "--file"},
    "diff": {"--from-file", "--to-file"},
    "tree": {"-o"},
}
# Variables programs read from the environment: setting them in a kernel changes what later commands run.
RUNS_LATER_VARIABLES = frozenset({
    "LD_PRELOAD", "LD_AUDIT", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS",
    "GIT_PROXY_COMMAND", "BASH_ENV", "ENV", "PROMPT_COMMAND", "GIT_EDITOR", "GIT_PAGER", "GIT_SEQUENCE_EDITOR",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR", "PYTHONSTARTUP", "PERL5OPT", "NODE_OPTIONS", "RUBYOPT", "JAVA_TOOL_OPTIONS",
    "DYLD_INSERT_LIBRARIES", "PS4", "LESSOPEN", "LESSCLOSE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
    "NPM_CONFIG_REGISTRY", "npm_config_registry", "UV_INDEX_URL", "PIP_TRUSTED_HOST", "PYTHONPATH",
    "PAGER", "EDITOR", "VISUAL", "MANPAGER", "BROWSER", "PATH", "LD_LIBRARY_PATH",
})
