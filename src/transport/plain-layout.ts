// PLAIN frames: small trees of plain values and tensors, written and read directly. This file
// holds their layout and limits; the encoder is plain-encode.ts, the decoder plain-decode.ts.
//
// NOTE [Plain frames]
// Most messages are small trees of plain values: a tuple [x, y], a dict {input, label}, a
// number. A VALUE frame goes through V8's serializer, whose Node wrapper alone costs a few µs
// a message (a native object, its buffer, the copy out of it: 2.8 µs for [k, 2k] here, and
// 1.7 µs to read it back), on top of the walk and the table. A PLAIN frame writes such a tree
// itself into one buffer: undefined, null, booleans, numbers, strings, arrays, plain objects,
// and tensors.
// Only what this layout represents exactly takes this path. The encoder gives up, and the
// VALUE path (the reference for structured-clone semantics) takes the message, at anything
// else: a bigint, a Date, a Map, a typed array, a Proxy, an arguments object, a module
// namespace, a class instance, a Queue; an object met twice (shared or cyclic: structured
// clone keeps the sharing); an array with holes, hidden elements or extra properties; more
// than MAX_NODES objects, MAX_DEPTH levels, MAX_ITEMS entries in one container, or INLINE_MAX
// bytes. It also gives up when entered again while it writes (a getter that sends a message).
// A getter read before the encoder gives up is read again by the VALUE path (which itself
// reads getters twice: its walk, then the serializer).
// Known gap: a built-in object whose prototype was replaced by Object.prototype or null (a
// Map made to look plain) travels as the plain object it looks like.
// Storages: the walk only notes each distinct storage; once it has succeeded, each is exported
// once (one reference in flight, one descriptor) and listed in a table after the tree, which
// tensor records refer to by index. So nothing is taken for a message that then goes the VALUE
// way, views of one storage cost one descriptor, and they arrive over one storage. The
// receiver reads the table first and imports every entry (those after a failed one are
// imported and dropped, as the VALUE path's discard does, so that no reference stays in
// flight), then the tree.
// Layout: [KIND_PLAIN, FRAME_VERSION, u32 offset of the table], the tree, the table. Numbers
// are little-endian. Tree values, a tag byte first:
//   0 undefined · 1 null · 2 false · 3 true · 4 int32 · 5 float64 · 6 string: u32 length in
//   UTF-16 units, then UTF-16LE (exact for any JS string) · 7 array: u32 length, then each
//   element · 8 object: u32 count, then per property its key (a string without tag) and its
//   value · 9 tensor: dtype, ndim, u16 storage index; f64 offset, shape…, stride….
// Table: u16 count, then per storage: strategy, name length, u16 descriptor index (0xffff:
// none), f64 nbytes, the name in latin1. Descriptors are the datagram's, one per
// file_descriptor storage.

/** The most objects (arrays, plain objects, tensors) a PLAIN frame holds. */
export const MAX_NODES = 256;
export const MAX_DEPTH = 32;
/** The most entries in one array or object. */
export const MAX_ITEMS = 1024;
/** A table entry's descriptor index when it has none. */
export const NO_FD = 0xffff;
/** The head: kind, version, u32 offset of the table. */
export const HEAD = 6;
export const T_UNDEFINED = 0,
  T_NULL = 1,
  T_FALSE = 2,
  T_TRUE = 3,
  T_INT = 4,
  T_FLOAT = 5,
  T_STRING = 6,
  T_ARRAY = 7,
  T_OBJECT = 8,
  T_TENSOR = 9;
/** A table entry: strategy, name length, descriptor index, nbytes, byte offset (uint32: NOTE [Packed small storages]); then the name. */
export const ENTRY = 16;
