"""GE op types a YAML file cannot declare: names the generated C++ would collide with.

A custom GE type becomes a C++ class, `REG_OP(Type)` declaring `class Type : public Operator` in
namespace `ge::op` (graph/operator_reg.h), whose members and the macros around it name other
classes of namespace ge unqualified (`Operator`, `AscendString`, `TensorDesc`, `OpReg`, `N()`,
`OpInt` ...): a type spelled like one of them shadows it, and the prototype, and every prototype
after it, no longer compiles. A type spelled like a macro is replaced by the preprocessor.

How these lists were made, and how tests/test_generated_text.py keeps them honest:

- `_CANN_NAMES`: every identifier of the form a GE type takes (`[A-Z][A-Za-z0-9]*`) that occurs in
  the preprocessed text of the headers the generated files include (graph/operator_reg.h,
  graph/types.h and the C++ headers of op_plugin_infer.h, from the pinned torch-npu wheel), each
  generated as the type of an op with every kind of input and attr, beside another op, and
  compiled with g++ -Wall -Wextra -Werror: these are the ones that failed, and
  ConvertToListAscendString, which ListString attrs call as String attrs call ConvertToAscendString.
  The test compiles every other such identifier as a GE type, in one translation unit.
- `_OP_ATTR_TYPES`: `Op<attr type>` for every attr type REG_OP knows (`Op##Type` in the ATTR
  macro), whether or not YAML can declare it.
- `_ASCEND_C_NAMES`: the classes an msOpGen project's operator definition derives from or calls
  unqualified in namespace ops (register/op_def.h, which the wheel does not ship; the class names
  of CANN's Ascend C documentation and of tests/test_msopgen_cpp.py's stand-in).
- `_MACROS`: the macros of that form defined after those includes (`g++ -dM -E`, glibc's errno
  and wait names, EOF, NULL, ...) plus the C library's signal names, INFINITY and NAN. The test
  checks that every macro g++ defines there is listed.

No name here is a CANN built-in type (the test checks it against TorchAir's op table): a YAML op
may map onto any built-in.
"""
from __future__ import annotations

# A GE type also names the generated files (<snake_case type>.h / .cc / .json): a bound on the type
# keeps every file name well inside the 255 bytes file systems allow.
MAX_GE_TYPE_LENGTH = 128

_CANN_NAMES = frozenset("""
    AscendString ConvertToAscendString ConvertToListAscendString N OpReg Operator
    OperatorCreatorRegister TensorDesc
""".split())
_OP_ATTR_TYPES = frozenset("""
    OpAscendString OpBool OpBytes OpFloat OpInt OpListAscendString OpListBool OpListFloat OpListInt
    OpListListInt OpListNamedAttrs OpListString OpListTensor OpListType OpNamedAttrs OpString
    OpTensor OpType
""".split())
_ASCEND_C_NAMES = frozenset("""
    OpDef OpParamDef OpAttrDef OpAICoreDef OpAICoreConfig
""".split())
_MACROS = frozenset("""
    ATTR BUFSIZ CSIGNAL DATATYPE E2BIG EACCES EADDRINUSE EADDRNOTAVAIL EADV EAFNOSUPPORT EAGAIN
    EALREADY EBADE EBADF EBADFD EBADMSG EBADR EBADRQC EBADSLT EBFONT EBUSY ECANCELED ECHILD ECHRNG
    ECOMM ECONNABORTED ECONNREFUSED ECONNRESET EDEADLK EDEADLOCK EDESTADDRREQ EDOM EDOTDOT EDQUOT
    EEXIST EFAULT EFBIG EHOSTDOWN EHOSTUNREACH EHWPOISON EIDRM EILSEQ EINPROGRESS EINTR EINVAL EIO
    EISCONN EISDIR EISNAM EKEYEXPIRED EKEYREJECTED EKEYREVOKED EL2HLT EL2NSYNC EL3HLT EL3RST ELIBACC
    ELIBBAD ELIBEXEC ELIBMAX ELIBSCN ELNRNG ELOOP EMEDIUMTYPE EMFILE EMLINK EMSGSIZE EMULTIHOP
    ENAMETOOLONG ENAVAIL ENETDOWN ENETRESET ENETUNREACH ENFILE ENOANO ENOBUFS ENOCSI ENODATA ENODEV
    ENOENT ENOEXEC ENOKEY ENOLCK ENOLINK ENOMEDIUM ENOMEM ENOMSG ENONET ENOPKG ENOPROTOOPT ENOSPC
    ENOSR ENOSTR ENOSYS ENOTBLK ENOTCONN ENOTDIR ENOTEMPTY ENOTNAM ENOTRECOVERABLE ENOTSOCK ENOTSUP
    ENOTTY ENOTUNIQ ENXIO EOF EOPNOTSUPP EOVERFLOW EOWNERDEAD EPERM EPFNOSUPPORT EPIPE EPROTO
    EPROTONOSUPPORT EPROTOTYPE ERANGE EREMCHG EREMOTE EREMOTEIO ERESTART ERFKILL EROFS ESHUTDOWN
    ESOCKTNOSUPPORT ESPIPE ESRCH ESRMNT ESTALE ESTRPIPE ETIME ETIMEDOUT ETOOMANYREFS ETXTBSY EUCLEAN
    EUNATCH EUSERS EWOULDBLOCK EXDEV EXFULL GRAPH INFINITY INPUT NAN NFDBITS NULL OUTPUT PASTE
    SIGABRT SIGALRM SIGBUS SIGCHLD SIGCLD SIGCONT SIGFPE SIGHUP SIGILL SIGINT SIGIO SIGIOT SIGKILL
    SIGPIPE SIGPOLL SIGPROF SIGPWR SIGQUIT SIGSEGV SIGSTKFLT SIGSTOP SIGSYS SIGTERM SIGTRAP SIGTSTP
    SIGTTIN SIGTTOU SIGURG SIGUSR1 SIGUSR2 SIGVTALRM SIGWINCH SIGXCPU SIGXFSZ WCONTINUED WEOF
    WEXITED WEXITSTATUS WIFCONTINUED WIFEXITED WIFSIGNALED WIFSTOPPED WNOHANG WNOWAIT WSTOPPED
    WSTOPSIG WTERMSIG WUNTRACED
""".split())

RESERVED_GE_TYPES: frozenset[str] = _CANN_NAMES | _OP_ATTR_TYPES | _ASCEND_C_NAMES | _MACROS
