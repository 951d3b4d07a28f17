"""Import-time stand-ins for modules that torch 1.13 (Debian) lacks and validation never calls.

Every name handed out is recorded. After arm() any CALL of a stand-in raises AbsentCalled, so a
validation that depends on one fails loudly instead of passing."""
import abc, importlib.abc, importlib.machinery, sys, types

USED = {}          # name -> count of attribute/import uses
ARMED = [False]
CALLED = []       # stand-ins called after arm() (each also raised AbsentCalled)
# Packages whose stand-ins validation may call: torchtitan's config functions build grain's
# data-loader option objects (grain.python.ReadOptions); those calls are listed, never hidden.
CALLABLE_AFTER_ARM = {'grain'}
CALLED_ALLOWED = []
# CUDA kernel packages whose version is read at import (a Triton-era version: the kernels are never built)
VERSIONS = {'triton': '3.4.0'}
# Stand-in packages whose __file__ is read at import (MindSpeed's op builders locate torch_npu's
# folder for kernels they would JIT-build later): a path that names the stand-in.
FILES = {}
# Plain constants the engines read at import as config defaults, with torch 2.x's values.
VALUES = {'torch.nn.attention.flex_attention._DEFAULT_SPARSE_BLOCK_SIZE': 128,
          # torch.compiler.is_compiling(): nothing is being compiled here, the true answer
          'torch.compiler.is_compiling': lambda: False}

class AbsentCalled(RuntimeError):
    pass

class _Meta(abc.ABCMeta):
    # A stand-in may be a base class (next to ABC or Generic): only the stand-in itself is fake;
    # a real subclass behaves as a normal class.
    def __getattr__(cls, a):
        if a.startswith('__') or '_absent_name' not in cls.__dict__:
            raise AttributeError(a)
        if cls._absent_name + '.' + a in VALUES:
            return VALUES[cls._absent_name + '.' + a]
        return _absent(cls._absent_name + '.' + a)
    def __call__(cls, *args, **kw):
        if '_absent_name' not in cls.__dict__:
            return super().__call__(*args, **kw)
        if ARMED[0] and cls._absent_name.split('.')[0] in CALLABLE_AFTER_ARM:
            CALLED_ALLOWED.append(cls._absent_name)
        elif ARMED[0]:
            CALLED.append(cls._absent_name)
            raise AbsentCalled(f"validation called absent {cls._absent_name}")
        USED[cls._absent_name + '()'] = USED.get(cls._absent_name + '()', 0) + 1
        # decorator use (@absent, @absent(...)) also yields a stand-in: the decorated function is
        # replaced, so calling it after arm() raises too
        return _absent(cls._absent_name + '()')
    def __getitem__(cls, k):
        return cls
    def __or__(cls, o):
        return cls
    def __ror__(cls, o):
        return cls
    def __repr__(cls):
        return f"<absent {cls._absent_name}>"
    def __iter__(cls):
        return iter(())
    def __bool__(cls):
        return False

def _absent(name):
    USED[name] = USED.get(name, 0) + 1
    return _Meta(name.rsplit('.', 1)[-1], (), {'_absent_name': name})

class _AbsentModule(types.ModuleType):
    def __getattr__(self, a):
        if a.startswith('__'):
            raise AttributeError(a)
        if self.__name__ + '.' + a in VALUES:
            return VALUES[self.__name__ + '.' + a]
        return _absent(self.__name__ + '.' + a)

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes):
        self.prefixes = prefixes
    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + '.') for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        USED['import ' + spec.name] = USED.get('import ' + spec.name, 0) + 1
        m = _AbsentModule(spec.name)
        m.__path__ = []
        if spec.name in VERSIONS:
            m.__version__ = VERSIONS[spec.name]
        if spec.name in FILES:
            m.__file__ = FILES[spec.name]
        return m
    def exec_module(self, module):
        pass

def install(prefixes, attrs=()):
    """prefixes: module names served as stand-ins when absent (only where the real import fails).
    attrs: 'module:name' attributes added to real modules that lack them."""
    missing = []
    for p in prefixes:
        try:
            importlib.import_module(p)
        except Exception:
            missing.append(p)
    sys.meta_path.insert(0, _Finder(missing))
    for spec in attrs:
        mod, name = spec.split(':')
        m = importlib.import_module(mod)
        if not hasattr(m, name):
            setattr(m, name, _absent(mod + '.' + name))
    return missing

def arm():
    ARMED[0] = True

def report():
    return sorted(USED)
