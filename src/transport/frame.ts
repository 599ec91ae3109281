// Messages as datagrams: encodeMessage() turns a value into one frame (bytes + descriptors,
// frame-encode.ts), decodeMessage() turns a received frame back into a value (frame-decode.ts);
// a frame too large for a datagram spills (spill.ts). This file is their NOTE and their face.
//
// NOTE [Frames]
// One message is always one datagram, whatever its size: with several producers and
// consumers on one socket, the pieces of a message cut into several datagrams could
// interleave with other messages. The first two bytes are the kind and FRAME_VERSION:
//  - TENSOR: a lone tensor, the common case, in a compact fixed layout (no V8 serializer):
//    dtype, shape, stride, offset and its storage handle (the byte offset of a packed piece,
//    NOTE [Packed small storages], in 64-byte units in bytes 6-7); descriptor 0 is the memfd
//    under file_descriptor.
//  - PLAIN: a small tree of plain values and tensors, written directly (NOTE [Plain frames],
//    plain-layout.ts): tuples, dicts, numbers, strings.
//  - VALUE: anything else, as V8 serializer output with the table of NOTE [Message table].
//  - SPILL: a VALUE frame too large for a datagram (INLINE_MAX), written into a shared
//    storage that travels in its place (its descriptor last); the receiver reads the inner
//    frame from it and lets it go, and the sender's cache recycles it like any segment.
// A frame that does not parse is a FrameDecodeError; every descriptor that came with it is
// closed whatever happens (see NOTE [Message table] for who owns what).
export { encodeMessage, checkMessage } from './frame-encode.js';
export { decodeMessage, decodeReceived } from './frame-decode.js';
export { FRAME_VERSION, INLINE_MAX, MAX_FRAME, MAX_FDS, type Frame } from './wire.js';
