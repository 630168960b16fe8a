package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// This file is the small torch layer on top of gopickle's pickle VM. It
// resolves only the globals in allowedGlobals, to inert Go values; nothing in
// the pickle can run code. Before the VM sees a byte, scanPickle walks the
// opcode stream to refuse disallowed globals by name, length fields that run
// past the data (gopickle allocates a length before reading it), unknown
// opcodes and deep MARK nesting. Any panic inside the VM is recovered into an
// error.

// maxMarkDepth bounds nested MARKs. A state_dict pickle nests three deep.
const maxMarkDepth = 1024

// storageClass is the Go value of torch.FloatStorage and friends: a type tag
// for the persistent id ('storage', torch.FloatStorage, key, location, numel).
type storageClass struct {
	name  string // "torch.FloatStorage"
	dtype string // safetensors spelling: "F32"
}

// storageRef is one storage named by a persistent id; its bytes are the zip
// entry data/<key>.
type storageRef struct {
	key   string
	class *storageClass
	numel int64
	users []string // tensor names, filled when the state_dict is read
}

// tensorRef is the result of torch._utils._rebuild_tensor_v2: a strided view
// of a storage.
type tensorRef struct {
	storage *storageRef
	offset  int64
	shape   []int64
	stride  []int64
}

// rebuildTensorV2 stands for torch._utils._rebuild_tensor_v2(storage,
// storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
type rebuildTensorV2 struct{}

// rebuildParameter stands for torch._utils._rebuild_parameter(data,
// requires_grad, backward_hooks), which wraps a tensor in nn.Parameter.
type rebuildParameter struct{}

// allowedGlobals is the complete list of globals a pickle may name. Anything
// else, including torch.storage._load_from_bytes (which runs torch.load on
// nested bytes), builtins, os or subprocess, is refused.
var allowedGlobals = map[string]func() any{
	"collections.OrderedDict":         func() any { return &types.OrderedDictClass{} },
	"torch._utils._rebuild_tensor_v2": func() any { return rebuildTensorV2{} },
	"torch._utils._rebuild_parameter": func() any { return rebuildParameter{} },
}

// torchStorages maps torch's typed storage classes to safetensors dtypes.
var torchStorages = map[string]string{
	"FloatStorage":    "F32",
	"HalfStorage":     "F16",
	"BFloat16Storage": "BF16",
	"DoubleStorage":   "F64",
	"LongStorage":     "I64",
	"IntStorage":      "I32",
	"ShortStorage":    "I16",
	"CharStorage":     "I8",
	"ByteStorage":     "U8",
	"BoolStorage":     "BOOL",
}

func init() {
	for name, dt := range torchStorages {
		sc := &storageClass{name: "torch." + name, dtype: dt}
		allowedGlobals[sc.name] = func() any { return sc }
	}
}

// allowedList returns the sorted allowlist for error messages.
func allowedList() string {
	names := make([]string, 0, len(allowedGlobals))
	for k := range allowedGlobals {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func refuseGlobal(file, module, name, where string) error {
	return fmt.Errorf("checkpoint: %s: refusing to load global %s.%s (%s; allowed: %s): %w",
		file, module, name, where, allowedList(), ErrUnsafe)
}

// stateDict is a decoded data.pkl: tensor views over named storages.
type stateDict struct {
	names    []string // in pickle order
	tensors  map[string]*tensorRef
	storages map[string]*storageRef
}

// parseStateDictPickle runs data.pkl (pkl) through the restricted VM and
// returns the state_dict it describes. file and entry name the source in
// errors. The VM's estimated allocations (see scanPickle) are charged to bud
// before it runs.
func parseStateDictPickle(pkl []byte, file, entry string, bud *budget) (sd *stateDict, err error) {
	cost, err := scanPickle(pkl, file, entry, bud.limit-bud.used)
	if err != nil {
		return nil, err
	}
	if !bud.take(cost) {
		return nil, formatErr(file, "%v", bud.refuse(cost, fmt.Sprintf("running %s (%d bytes of pickle)", entry, len(pkl))))
	}
	sd = &stateDict{tensors: map[string]*tensorRef{}, storages: map[string]*storageRef{}}
	u := pickle.NewUnpickler(bytes.NewReader(pkl))
	u.FindClass = func(module, name string) (any, error) {
		if mk, ok := allowedGlobals[module+"."+name]; ok {
			return mk(), nil
		}
		return nil, refuseGlobal(file, module, name, "STACK_GLOBAL in "+entry)
	}
	u.PersistentLoad = func(pid any) (any, error) { return sd.persistentLoad(pid) }
	u.GetExtension = func(code int) (any, error) {
		return nil, fmt.Errorf("extension code %d is not supported", code)
	}
	defer func() {
		if r := recover(); r != nil {
			sd, err = nil, formatErr(file, "%s: pickle VM failed: %v", entry, r)
		}
	}()
	top, err := u.Load()
	if err != nil {
		if errors.Is(err, ErrUnsafe) || errors.Is(err, ErrFormat) {
			return nil, err // already ours, with file and context
		}
		return nil, formatErr(file, "%s: %s", entry, clipN(err.Error(), 300))
	}
	if err := sd.collect(top, file, entry); err != nil {
		return nil, err
	}
	return sd, nil
}

// persistentLoad resolves ('storage', storage_type, key, location, numel).
// Several tensors may name the same key (tied weights); they share one
// storageRef, and the type and numel must agree.
func (sd *stateDict) persistentLoad(pid any) (any, error) {
	t, ok := pid.(*types.Tuple)
	if !ok || t.Len() != 5 {
		return nil, fmt.Errorf("persistent id %s is not ('storage', type, key, location, numel)", describe(pid))
	}
	tag, _ := t.Get(0).(string)
	class, okc := t.Get(1).(*storageClass)
	key, okk := t.Get(2).(string)
	_, okl := t.Get(3).(string)
	n, okn := t.Get(4).(int)
	switch {
	case tag != "storage":
		return nil, fmt.Errorf("persistent id tag is %s, want 'storage'", describe(t.Get(0)))
	case !okc:
		return nil, fmt.Errorf("persistent id storage type is %s, want a torch.*Storage class", describe(t.Get(1)))
	case !okk || key == "":
		return nil, fmt.Errorf("persistent id key is %s, want a non-empty string", describe(t.Get(2)))
	case !okl:
		return nil, fmt.Errorf("persistent id location is %s, want a string", describe(t.Get(3)))
	case !okn || n < 0:
		return nil, fmt.Errorf("storage %q: numel is %s, want a non-negative int", key, describe(t.Get(4)))
	}
	if s, ok := sd.storages[key]; ok {
		if s.class != class || s.numel != int64(n) {
			return nil, fmt.Errorf("storage %q is named twice with different types or sizes: %s[%d] and %s[%d]",
				key, s.class.name, s.numel, class.name, n)
		}
		return s, nil
	}
	s := &storageRef{key: key, class: class, numel: int64(n)}
	sd.storages[key] = s
	return s, nil
}

// Call implements types.Callable for _rebuild_tensor_v2.
func (rebuildTensorV2) Call(args ...any) (any, error) {
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 takes 6 or 7 arguments, got %d", len(args))
	}
	s, ok := args[0].(*storageRef)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage is %s, want a persistent storage", describe(args[0]))
	}
	off, ok := args[1].(int)
	if !ok || off < 0 {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage_offset is %s, want a non-negative int", describe(args[1]))
	}
	shape, err := intTuple(args[2], "size")
	if err != nil {
		return nil, err
	}
	stride, err := intTuple(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(shape) != len(stride) {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size %v and stride %v differ in length", shape, stride)
	}
	if _, ok := args[4].(bool); !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: requires_grad is %s, want a bool", describe(args[4]))
	}
	// args[5] (backward hooks, an empty OrderedDict) and args[6] (metadata)
	// carry nothing a reader of the values needs.
	return &tensorRef{storage: s, offset: int64(off), shape: shape, stride: stride}, nil
}

// Call implements types.Callable for _rebuild_parameter.
func (rebuildParameter) Call(args ...any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("_rebuild_parameter takes 3 arguments, got %d", len(args))
	}
	t, ok := args[0].(*tensorRef)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter: data is %s, want a tensor", describe(args[0]))
	}
	return t, nil
}

// intTuple converts a pickled tuple of ints.
func intTuple(v any, what string) ([]int64, error) {
	t, ok := v.(*types.Tuple)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: %s is %s, want a tuple of ints", what, describe(v))
	}
	if t.Len() > maxDims {
		return nil, fmt.Errorf("_rebuild_tensor_v2: %s has %d dimensions, more than %d", what, t.Len(), maxDims)
	}
	out := make([]int64, t.Len())
	for i := range out {
		n, ok := t.Get(i).(int)
		if !ok {
			return nil, fmt.Errorf("_rebuild_tensor_v2: %s[%d] is %s, want an int", what, i, describe(t.Get(i)))
		}
		out[i] = int64(n)
	}
	return out, nil
}

// collect checks that top is a (possibly ordered) dict from string names to
// tensors and records them.
func (sd *stateDict) collect(top any, file, entry string) error {
	add := func(k, v any) error {
		name, ok := k.(string)
		if !ok {
			return formatErr(file, "%s: state_dict key %s is not a string", entry, describe(k))
		}
		t, ok := v.(*tensorRef)
		if !ok {
			return formatErr(file, "%s: state_dict value for %q is %s, not a tensor", entry, name, describe(v))
		}
		if _, dup := sd.tensors[name]; dup {
			return formatErr(file, "%s: state_dict has key %q twice", entry, name)
		}
		sd.tensors[name] = t
		sd.names = append(sd.names, name)
		t.storage.users = append(t.storage.users, name)
		return nil
	}
	switch d := top.(type) {
	case *types.OrderedDict:
		for e := d.List.Front(); e != nil; e = e.Next() {
			oe := e.Value.(*types.OrderedDictEntry)
			if err := add(oe.Key, oe.Value); err != nil {
				return err
			}
		}
	case *types.Dict:
		for _, e := range *d {
			if err := add(e.Key, e.Value); err != nil {
				return err
			}
		}
	default:
		return formatErr(file, "%s: top-level object is %s, want a state_dict (OrderedDict of tensors)", entry, describe(top))
	}
	return nil
}

// describe names a pickled value's type, with its value when short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return fmt.Sprintf("str %q", clip(x))
	case int:
		return fmt.Sprintf("int %d", x)
	case bool:
		return fmt.Sprintf("bool %v", x)
	case float64:
		return fmt.Sprintf("float %v", x)
	case *storageClass:
		return x.name
	case *storageRef:
		return fmt.Sprintf("storage %q", x.key)
	case *tensorRef:
		return "a tensor"
	case *types.Tuple:
		return fmt.Sprintf("a tuple of %d items", x.Len())
	}
	return fmt.Sprintf("a %T", v)
}

// Pickle opcode argument encodings (Python's Lib/pickletools.py documents
// every opcode; the numbers here are read from that table).
const (
	argNone  = iota
	argLine  // bytes up to and including '\n'
	argLine2 // two such lines (GLOBAL, INST)
	argFixed // n bytes
	argLen1  // 1-byte length, then that many bytes
	argLen4  // 4-byte little-endian length, then that many bytes
	argLen8  // 8-byte little-endian length, then that many bytes
)

type opInfo struct {
	name string
	arg  int
	n    int // for argFixed
	// marks: +1 pushes a MARK, -1 pops one.
	marks int
	// str: pushes a string given by the argument.
	str bool
}

var opcodes [256]*opInfo

func init() {
	def := func(code byte, name string, arg, n, marks int, str bool) {
		opcodes[code] = &opInfo{name: name, arg: arg, n: n, marks: marks, str: str}
	}
	// Protocol 0 and 1.
	def('(', "MARK", argNone, 0, +1, false)
	def('.', "STOP", argNone, 0, 0, false)
	def('0', "POP", argNone, 0, 0, false)
	def('1', "POP_MARK", argNone, 0, -1, false)
	def('2', "DUP", argNone, 0, 0, false)
	def('F', "FLOAT", argLine, 0, 0, false)
	def('I', "INT", argLine, 0, 0, false)
	def('J', "BININT", argFixed, 4, 0, false)
	def('K', "BININT1", argFixed, 1, 0, false)
	def('L', "LONG", argLine, 0, 0, false)
	def('M', "BININT2", argFixed, 2, 0, false)
	def('N', "NONE", argNone, 0, 0, false)
	def('P', "PERSID", argLine, 0, 0, false)
	def('Q', "BINPERSID", argNone, 0, 0, false)
	def('R', "REDUCE", argNone, 0, 0, false)
	def('S', "STRING", argLine, 0, 0, true)
	def('T', "BINSTRING", argLen4, 0, 0, true)
	def('U', "SHORT_BINSTRING", argLen1, 0, 0, true)
	def('V', "UNICODE", argLine, 0, 0, true)
	def('X', "BINUNICODE", argLen4, 0, 0, true)
	def('a', "APPEND", argNone, 0, 0, false)
	def('b', "BUILD", argNone, 0, 0, false)
	def('c', "GLOBAL", argLine2, 0, 0, false)
	def('d', "DICT", argNone, 0, -1, false)
	def('}', "EMPTY_DICT", argNone, 0, 0, false)
	def('e', "APPENDS", argNone, 0, -1, false)
	def('g', "GET", argLine, 0, 0, false)
	def('h', "BINGET", argFixed, 1, 0, false)
	def('i', "INST", argLine2, 0, -1, false)
	def('j', "LONG_BINGET", argFixed, 4, 0, false)
	def('l', "LIST", argNone, 0, -1, false)
	def(']', "EMPTY_LIST", argNone, 0, 0, false)
	def('o', "OBJ", argNone, 0, -1, false)
	def('p', "PUT", argLine, 0, 0, false)
	def('q', "BINPUT", argFixed, 1, 0, false)
	def('r', "LONG_BINPUT", argFixed, 4, 0, false)
	def('s', "SETITEM", argNone, 0, 0, false)
	def('t', "TUPLE", argNone, 0, -1, false)
	def(')', "EMPTY_TUPLE", argNone, 0, 0, false)
	def('u', "SETITEMS", argNone, 0, -1, false)
	def('G', "BINFLOAT", argFixed, 8, 0, false)
	// Protocol 2.
	def(0x80, "PROTO", argFixed, 1, 0, false)
	def(0x81, "NEWOBJ", argNone, 0, 0, false)
	def(0x82, "EXT1", argFixed, 1, 0, false)
	def(0x83, "EXT2", argFixed, 2, 0, false)
	def(0x84, "EXT4", argFixed, 4, 0, false)
	def(0x85, "TUPLE1", argNone, 0, 0, false)
	def(0x86, "TUPLE2", argNone, 0, 0, false)
	def(0x87, "TUPLE3", argNone, 0, 0, false)
	def(0x88, "NEWTRUE", argNone, 0, 0, false)
	def(0x89, "NEWFALSE", argNone, 0, 0, false)
	def(0x8a, "LONG1", argLen1, 0, 0, false)
	def(0x8b, "LONG4", argLen4, 0, 0, false)
	// Protocol 3.
	def('B', "BINBYTES", argLen4, 0, 0, false)
	def('C', "SHORT_BINBYTES", argLen1, 0, 0, false)
	// Protocol 4.
	def(0x8c, "SHORT_BINUNICODE", argLen1, 0, 0, true)
	def(0x8d, "BINUNICODE8", argLen8, 0, 0, true)
	def(0x8e, "BINBYTES8", argLen8, 0, 0, false)
	def(0x8f, "EMPTY_SET", argNone, 0, 0, false)
	def(0x90, "ADDITEMS", argNone, 0, -1, false)
	def(0x91, "FROZENSET", argNone, 0, -1, false)
	def(0x92, "NEWOBJ_EX", argNone, 0, 0, false)
	def(0x93, "STACK_GLOBAL", argNone, 0, 0, false)
	def(0x94, "MEMOIZE", argNone, 0, 0, false)
	def(0x95, "FRAME", argFixed, 8, 0, false)
	// Protocol 5.
	def(0x96, "BYTEARRAY8", argLen8, 0, 0, false)
	def(0x97, "NEXT_BUFFER", argNone, 0, 0, false)
	def(0x98, "READONLY_BUFFER", argNone, 0, 0, false)
}

// Limits of the pickle machine. Each opcode is at least one byte, so a
// pickle of n bytes runs at most n operations; these bound what those
// operations may hold. A torch.save state_dict keeps at most a few thousand
// items on the stack (pickle batches SETITEMS by 1,000 pairs), nests MARKs
// three deep and memoizes about ten objects per tensor.
const (
	maxStackItems  = 1 << 20 // items on the stack, all MARK frames together
	maxMemoEntries = 1 << 22 // distinct memo keys
	maxNumberLine  = 64      // bytes of an INT, LONG, FLOAT, GET or PUT text argument
	maxLongBytes   = 64      // bytes of a LONG1 or LONG4 argument (a 512-bit integer)
	maxDims        = 64      // dimensions of a tensor view
	maxGlobalName  = 256     // longest module or name the scan remembers for STACK_GLOBAL
)

// Upper estimates, in bytes, of what gopickle's VM allocates per operation
// (pickle/pickle.go v0.2.0: read() allocates every argument, MARK starts a
// 16-slot stack, containers grow by append). scanPickle adds them up and the
// total is charged to the reader's memory budget before the VM runs.
const (
	costSlot     = 18   // a 16-byte stack slot, with size-class rounding
	costMark     = 320  // a new 16-slot stack and its meta-stack slot
	costBox      = 16   // a boxed int or float, an 8-byte argument buffer
	costLine     = 32   // readLine's initial buffer (plus 4 per byte)
	costContainr = 224  // an empty list, dict or tuple header with backing
	costSet      = 320  // an empty set (a map)
	costItem     = 80   // one item appended to a list (growth included)
	costPair     = 256  // one dict or OrderedDict entry (map, list element)
	costSetItem  = 96   // one set entry
	costMemo     = 160  // one new memo entry (VM map and this scanner's set)
	costCall     = 1024 // REDUCE, NEWOBJ, INST, OBJ: an allowlisted call's result (at most 64 dims)
	costStateKey = 96   // one entry BUILD copies into an object's attributes
	// gopickle's type errors format the offending object with %#v, element
	// by element; the largest container the pickle can build is charged
	// once at this rate per item.
	costFormat = 192
)

// simFrame is one MARK frame of the simulated stack: its length and the
// capacity gopickle's slice would have.
type simFrame struct{ n, cap int64 }

// growCap is Go's growth rule for appending to a full slice of cap elements.
func growCap(c int64) int64 {
	if c < 256 {
		return max(2*c, 1)
	}
	return c + (c+3*256)/4
}

// scanPickle walks the opcodes of pkl up to STOP without executing them and
// returns an upper estimate of the bytes the VM will allocate running them,
// refusing the pickle as soon as the estimate passes limit.
// A pickle is a straight-line program, so the walk sees exactly what the VM
// will do: it simulates the stack's depth (not its values) and the memo's
// keys. It refuses unknown opcodes, arguments that run past the end, FRAME
// sizes larger than the rest of the data, protocols above 5, MARK nesting
// deeper than maxMarkDepth, more than maxStackItems stacked items or
// maxMemoEntries memo keys, a GET of a key never PUT, oversized numbers,
// NEWOBJ_EX (which copies its argument tuple; no state_dict uses it), and
// GLOBAL, INST or STACK_GLOBAL (when its operands are literal strings)
// naming anything outside allowedGlobals. The VM resolves globals through
// the same allowlist; this pass names them early and also covers the few
// that gopickle resolves by itself (__builtin__.object,
// copy_reg._reconstructor), which map to inert Go values anyway.
func scanPickle(pkl []byte, file, entry string, limit int64) (int64, error) {
	s := &pickleScanner{
		pkl: pkl, file: file, entry: entry,
		frames: []simFrame{{0, 16}},
		memo:   map[int]struct{}{},
	}
	for s.pos < len(pkl) {
		start := s.pos
		code := pkl[s.pos]
		op := opcodes[code]
		if op == nil {
			return 0, s.bad(start, "unknown pickle opcode 0x%02x", code)
		}
		s.pos++
		arg, err := s.readArg(op, start)
		if err != nil {
			return 0, err
		}
		stop, err := s.checkArg(code, op, start, arg)
		if err != nil {
			return 0, err
		}
		if stop {
			return s.cost + costFormat*(s.maxFrame+s.grown), nil
		}
		if err := s.memoize(code, op, start, arg); err != nil {
			return 0, err
		}
		if err := s.stackEffect(code, start); err != nil {
			return 0, err
		}
		if s.total > maxStackItems {
			return 0, s.bad(start, "%s: the stack holds more than %d items", op.name, maxStackItems)
		}
		if s.cost > limit { // stop early: the memo set above grows with cost
			return 0, s.bad(start, "running the pickle up to %s would allocate about %d bytes, more than the %d bytes left of the memory budget (4 × file size + 128 MiB)",
				op.name, s.cost, limit)
		}
		s.trackString(code, op, arg)
	}
	return 0, formatErr(file, "%s: pickle has no STOP opcode (truncated?)", entry)
}

// pickleScanner is scanPickle's state: the read position, the running cost
// estimate, the simulated stack and memo, and the last two literal strings
// pushed.
type pickleScanner struct {
	pkl         []byte
	file, entry string
	pos         int   // the next byte to read
	cost        int64 // the estimate so far, in bytes

	// The last two stack pushes, when they were literal strings (for
	// STACK_GLOBAL); known tells whether each is known.
	last  [2]string
	known [2]bool

	// The simulated stack. Underflows are clamped: the VM reports them.
	frames []simFrame
	total  int64 // items in all frames

	memo      map[int]struct{}
	dictItems int64 // entries ever set into any dict: bounds any one dict's size
	// The largest MARK frame turned into a container, and the items ever
	// added to existing containers: together they bound any container.
	maxFrame, grown int64
}

// bad returns the error for the opcode at byte pos.
func (s *pickleScanner) bad(pos int, format string, args ...any) error {
	return formatErr(s.file, "%s: byte %d: %s", s.entry, pos, fmt.Sprintf(format, args...))
}

// readArg reads the argument of op, the opcode at byte start, and charges
// what the VM allocates reading it. GLOBAL and INST are refused here unless
// they name an allowed global; their argument is not returned.
func (s *pickleScanner) readArg(op *opInfo, start int) ([]byte, error) {
	var arg []byte
	need := func(n uint64, what string) error {
		if n > uint64(len(s.pkl)-s.pos) {
			return s.bad(start, "%s %s needs %d bytes, only %d remain (truncated?)", op.name, what, n, len(s.pkl)-s.pos)
		}
		arg = s.pkl[s.pos : s.pos+int(n)]
		s.pos += int(n)
		return nil
	}
	line := func() ([]byte, error) {
		i := bytes.IndexByte(s.pkl[s.pos:], '\n')
		if i < 0 {
			return nil, s.bad(start, "%s argument has no terminating newline (truncated?)", op.name)
		}
		l := s.pkl[s.pos : s.pos+i]
		s.pos += i + 1
		s.cost += costLine + 4*int64(len(l))
		return l, nil
	}
	var err error
	switch op.arg {
	case argLine:
		arg, err = line()
	case argLine2:
		var mod, name []byte
		if mod, err = line(); err == nil {
			if name, err = line(); err == nil {
				if _, ok := allowedGlobals[string(mod)+"."+string(name)]; !ok {
					return nil, refuseGlobal(s.file, string(mod), string(name), fmt.Sprintf("%s at %s byte %d", op.name, s.entry, start))
				}
			}
		}
	case argFixed:
		err = need(uint64(op.n), "argument")
		s.cost += costBox
	case argLen1, argLen4, argLen8:
		width := map[int]int{argLen1: 1, argLen4: 4, argLen8: 8}[op.arg]
		if err = need(uint64(width), "length"); err == nil {
			var n uint64
			for i := width - 1; i >= 0; i-- {
				n = n<<8 | uint64(arg[i])
			}
			err = need(n, "data")
			// read(n) and, for strings, the string conversion.
			s.cost += costBox + 2*int64(len(arg)) + 24
		}
	}
	return arg, err
}

// checkArg refuses the opcodes and arguments the VM must not see (oversized
// numbers, NEWOBJ_EX, newer protocols, FRAMEs past the end, STACK_GLOBAL of a
// global outside the allowlist) and charges what the others allocate. It
// reports stop at STOP.
func (s *pickleScanner) checkArg(code byte, op *opInfo, start int, arg []byte) (stop bool, err error) {
	switch code {
	case 'I', 'L', 'F', 'g', 'p':
		if len(arg) > maxNumberLine {
			return false, s.bad(start, "%s argument of %d bytes, more than %d", op.name, len(arg), maxNumberLine)
		}
	case 0x8a, 0x8b: // LONG1, LONG4: gopickle builds a big.Int byte by byte
		if len(arg) > maxLongBytes {
			return false, s.bad(start, "%s of %d bytes, more than %d", op.name, len(arg), maxLongBytes)
		}
		s.cost += 64 * int64(len(arg))
	case 0x92:
		return false, s.bad(start, "opcode NEWOBJ_EX is not used by torch.save state_dicts")
	case 0x80: // PROTO
		if arg[0] > pickle.HighestProtocol {
			return false, s.bad(start, "pickle protocol %d is newer than %d", arg[0], pickle.HighestProtocol)
		}
	case 0x95: // FRAME: gopickle copies the frame
		n := binary.LittleEndian.Uint64(arg)
		if n > uint64(len(s.pkl)-s.pos) {
			return false, s.bad(start, "FRAME of %d bytes, only %d remain (truncated?)", n, len(s.pkl)-s.pos)
		}
		s.cost += int64(n) + 64
	case 0x93: // STACK_GLOBAL
		if s.known[0] && s.known[1] {
			if _, ok := allowedGlobals[s.last[0]+"."+s.last[1]]; !ok {
				return false, refuseGlobal(s.file, s.last[0], s.last[1], fmt.Sprintf("STACK_GLOBAL at %s byte %d", s.entry, start))
			}
		}
	case '.':
		return true, nil
	}
	return false, nil
}

// memoize simulates the memo: a GET must name a key PUT before, and each new
// key PUT is charged and counted against maxMemoEntries.
func (s *pickleScanner) memoize(code byte, op *opInfo, start int, arg []byte) error {
	memoKey := -1
	switch code {
	case 'g', 'p':
		k, err := strconv.Atoi(string(arg))
		if err != nil || k < 0 {
			return s.bad(start, "%s argument %q is not a memo index", op.name, clip(string(arg)))
		}
		memoKey = k
	case 'h', 'q':
		memoKey = int(arg[0])
	case 'j', 'r':
		memoKey = int(binary.LittleEndian.Uint32(arg))
	case 0x94: // MEMOIZE stores at len(memo), like the VM
		memoKey = len(s.memo)
	}
	switch code {
	case 'g', 'h', 'j': // GET
		if _, ok := s.memo[memoKey]; !ok {
			return s.bad(start, "%s of memo key %d, which was never PUT", op.name, memoKey)
		}
	case 'p', 'q', 'r', 0x94: // PUT
		if _, ok := s.memo[memoKey]; !ok {
			if len(s.memo) >= maxMemoEntries {
				return s.bad(start, "more than %d memo entries", maxMemoEntries)
			}
			s.memo[memoKey] = struct{}{}
			s.cost += costMemo
		}
	}
	return nil
}

// stackEffect applies the opcode's effect on the simulated stack (Python's
// Lib/pickletools.py, stack_before/after) and charges what the VM allocates
// for it.
func (s *pickleScanner) stackEffect(code byte, start int) error {
	switch code {
	case '(': // MARK
		if len(s.frames) > maxMarkDepth {
			return s.bad(start, "MARKs nest deeper than %d", maxMarkDepth)
		}
		s.frames = append(s.frames, simFrame{0, 16})
		s.cost += costMark
	case '0': // POP: an empty frame pops its MARK
		if s.frames[len(s.frames)-1].n > 0 {
			s.pop(1)
		} else {
			s.popMark()
		}
	case '1': // POP_MARK
		s.popMark()
	case 't', 'l', 'd', 0x91, 'i', 'o':
		s.buildFromMark(code)
	case 'e', 'u', 0x90, 'a', 's', 'b':
		s.addToContainer(code)
	default:
		s.plainEffect(code)
	}
	return nil
}

// buildFromMark simulates the opcodes that turn the top MARK frame into one
// value: TUPLE, LIST, DICT, FROZENSET, INST and OBJ.
func (s *pickleScanner) buildFromMark(code byte) {
	n := s.popMark()
	s.maxFrame = max(s.maxFrame, n)
	s.push()
	switch code {
	case 't', 'l': // TUPLE, LIST: the frame's slice becomes the container
		s.cost += costContainr
	case 'd': // DICT
		s.cost += costContainr + costPair*(n/2)
		s.dictItems += n / 2
	case 0x91: // FROZENSET
		s.cost += costSet + costSetItem*n
	case 'i', 'o': // INST, OBJ
		s.cost += costCall
	}
}

// addToContainer simulates the opcodes that add to a container already on
// the stack: APPENDS, SETITEMS and ADDITEMS (from a MARK frame), APPEND,
// SETITEM and BUILD.
func (s *pickleScanner) addToContainer(code byte) {
	switch code {
	case 'e': // APPENDS
		n := s.popMark()
		s.pop(1)
		s.push()
		s.cost += costItem * n
		s.grown += n
	case 'u': // SETITEMS
		n := s.popMark()
		s.pop(1)
		s.push()
		s.cost += costPair * (n / 2)
		s.dictItems += n / 2
		s.grown += n
	case 0x90: // ADDITEMS
		n := s.popMark()
		s.pop(1)
		s.push()
		s.cost += costSetItem * n
		s.grown += n
	case 'a': // APPEND
		s.pop(2)
		s.push()
		s.cost += costItem
		s.grown++
	case 's': // SETITEM
		s.pop(2)
		s.cost += costPair
		s.dictItems++
		s.grown += 2
	case 'b': // BUILD copies a dict state (and slot state) entry by entry
		s.pop(1)
		s.cost += costCall + 2*costStateKey*s.dictItems
	}
}

// plainEffect simulates the opcodes that pop a fixed number of values and
// push at most one.
func (s *pickleScanner) plainEffect(code byte) {
	switch code {
	case 'R', 0x81: // REDUCE, NEWOBJ
		s.pop(2)
		s.push()
		s.cost += costCall
	case 'Q', 0x85: // BINPERSID, TUPLE1
		s.pop(1)
		s.push()
		s.cost += costCall / 8
	case 0x86, 0x93: // TUPLE2, STACK_GLOBAL
		s.pop(2)
		s.push()
		s.cost += costContainr / 2
	case 0x87: // TUPLE3
		s.pop(3)
		s.push()
		s.cost += costContainr / 2
	case ')', '}', ']': // EMPTY_TUPLE, EMPTY_DICT, EMPTY_LIST
		s.push()
		s.cost += costContainr
	case 0x8f: // EMPTY_SET
		s.push()
		s.cost += costSet
	case 0x80, 0x95, 'p', 'q', 'r', 0x94, 0x98: // PROTO, FRAME, PUT, MEMOIZE, READONLY_BUFFER
	default: // every other opcode pushes one value
		s.push()
		s.cost += costBox
	}
}

// push pushes one item, charging the slice growth gopickle would do.
func (s *pickleScanner) push() {
	f := &s.frames[len(s.frames)-1]
	if f.n == f.cap {
		f.cap = growCap(f.cap)
		s.cost += f.cap * costSlot
	}
	f.n++
	s.total++
}

// pop pops k items from the top frame, or as many as it holds.
func (s *pickleScanner) pop(k int64) {
	f := &s.frames[len(s.frames)-1]
	k = min(k, f.n)
	f.n -= k
	s.total -= k
}

// popMark pops the top MARK frame (or empties the bottom one) and returns
// the number of items it held.
func (s *pickleScanner) popMark() int64 {
	f := s.frames[len(s.frames)-1]
	s.total -= f.n
	if len(s.frames) > 1 {
		s.frames = s.frames[:len(s.frames)-1]
	} else {
		s.frames[0].n = 0
	}
	return f.n
}

// trackString records whether the opcode pushed a literal string, and which,
// for a later STACK_GLOBAL.
func (s *pickleScanner) trackString(code byte, op *opInfo, arg []byte) {
	push := func(str string, ok bool) {
		s.last[0], s.known[0] = s.last[1], s.known[1]
		s.last[1], s.known[1] = str, ok
	}
	switch {
	case code == 'S': // STRING: a quoted repr; the VM strips the quotes
		if len(arg) >= 2 && len(arg) <= maxGlobalName && (arg[0] == '\'' || arg[0] == '"') && arg[len(arg)-1] == arg[0] {
			push(string(arg[1:len(arg)-1]), true)
		} else {
			push("", false)
		}
	case op.str && len(arg) <= maxGlobalName:
		push(string(arg), true)
	case op.str: // too long to be an allowed name: refused by STACK_GLOBAL
		push(string(arg[:maxGlobalName])+"...", true)
	case code == 0x94 || code == 'p' || code == 'q' || code == 'r' || code == 0x95 || code == 0x80:
		// MEMOIZE, PUT, BINPUT, LONG_BINPUT, FRAME, PROTO leave the stack alone.
	default:
		push("", false)
	}
}

// materialise returns tensor t read from its decoded storage st, row-major.
// A contiguous view is returned as a capacity-limited subslice of st, shared
// with every other view of that storage. A strided view is gathered into a
// new slice, charged to bud first, and only when it holds no more elements
// than the storage, so that a zero-stride (broadcast) view in a tiny file
// cannot demand unbounded memory. Offsets, sizes and strides are checked
// with overflow-safe arithmetic before anything is touched.
func materialise(t *tensorRef, st []float32, bud *budget) ([]float32, error) {
	size := dtypeSizes[t.storage.class.dtype]
	n, err := numel(t.shape, size)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return []float32{}, nil
	}
	for i, s := range t.stride {
		if s < 0 {
			return nil, fmt.Errorf("stride %v has negative entry %d at dim %d", t.stride, s, i)
		}
	}
	// Highest element index the view touches: offset + sum((size_i-1)*stride_i).
	last := t.offset
	contiguous := true
	expect := int64(1)
	for i := len(t.shape) - 1; i >= 0; i-- {
		d, s := t.shape[i], t.stride[i]
		if d > 1 && s != expect {
			contiguous = false
		}
		expect *= d // cannot overflow: the product is numel
		if s != 0 && (d-1) > (math.MaxInt64-last)/s {
			return nil, fmt.Errorf("view offset %d, size %v, stride %v overflows", t.offset, t.shape, t.stride)
		}
		last += (d - 1) * s
	}
	if last >= int64(len(st)) {
		return nil, fmt.Errorf("view offset %d, size %v, stride %v reaches element %d of a %d-element storage",
			t.offset, t.shape, t.stride, last, len(st))
	}
	if contiguous {
		return st[t.offset : t.offset+n : t.offset+n], nil
	}
	if n > int64(len(st)) {
		return nil, fmt.Errorf("strided view size %v stride %v has %d elements, more than its %d-element storage (broadcast views are refused)",
			t.shape, t.stride, n, len(st))
	}
	if !bud.take(4 * n) {
		return nil, bud.refuse(4*n, fmt.Sprintf("copying strided view size %v stride %v (%d elements)", t.shape, t.stride, n))
	}
	out := make([]float32, n)
	idx := make([]int64, len(t.shape))
	for k := range out {
		p := t.offset
		for i, j := range idx {
			p += j * t.stride[i]
		}
		out[k] = st[p]
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < t.shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}
