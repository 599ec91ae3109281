// V8's serializer with the message table of NOTE [Message table]: markers are written as
// table indices, and read back as the rebuilt objects.
// Plain v8.Serializer, not DefaultSerializer: the default one reads typed arrays back as views
// of its input, which for us is a receive buffer reused by the next message; V8's own path
// copies them into fresh ArrayBuffers (and Buffers arrive as Uint8Arrays, as with
// structured clone).
import { Serializer, Deserializer } from 'node:v8';
import { NotTransferableError, FrameDecodeError } from '../errors.js';
import { markerIndex } from './markers.js';

export class MessageWriter extends Serializer {
  _writeHostObject(obj: object): void {
    const k = markerIndex(obj);
    if (k === undefined) {
      throw new NotTransferableError(
        `The message holds a ${obj.constructor?.name ?? 'native'} object, which cannot be sent to another process or thread. Send data and tensors instead.`,
        '(message)',
      );
    }
    this.writeUint32(k);
  }

  _getDataCloneError(message: string): Error {
    return new NotTransferableError(`The message cannot be sent: ${message}. Send structured-clonable values and tensors.`, '(message)');
  }
}

export class MessageReader extends Deserializer {
  objects: readonly object[] = [];

  _readHostObject(): object {
    const k = this.readUint32();
    const obj = this.objects[k];
    if (obj === undefined) throw new FrameDecodeError(`A message refers to object ${k} of a table of ${this.objects.length}.`);
    return obj;
  }
}
