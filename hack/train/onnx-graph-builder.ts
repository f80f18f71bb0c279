import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
type NodeProto = onnxProto.onnx.INodeProto;
type TensorProto = onnxProto.onnx.ITensorProto;
type ValueInfoProto = onnxProto.onnx.IValueInfoProto;
type AttributeProto = onnxProto.onnx.IAttributeProto;

export type ElemType = 'float' | 'int64';
export type Dim = number | string;
export type AttrValue = number | number[] | string | { float: number } | { tensor: TensorProto };

const ELEM_TYPES: Record<ElemType, number> = { float: onnx.TensorProto.DataType.FLOAT, int64: onnx.TensorProto.DataType.INT64 };

/**
 * A minimal ONNX graph writer: nodes get generated output names, constants become initializers.
 * Just enough for the exporter to read like the model's math.
 */
export class OnnxGraphBuilder {
  private readonly nodes: NodeProto[] = [];
  private readonly initializers: TensorProto[] = [];
  private readonly inputs: ValueInfoProto[] = [];
  private readonly outputs: ValueInfoProto[] = [];
  private readonly weightNames = new Set<string>();
  private counter = 0;
  /** Values renamed by output(): later nodes that use the old name read the output. */
  private readonly renamed = new Map<string, string>();

  constructor(private readonly name: string) {}

  input(name: string, type: ElemType, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, type, dims));
    return name;
  }

  /**
   * Mark `value` as a graph output under `name`. The node that computes it is renamed to write `name`
   * itself: an Identity node in between would cost ONNX Runtime a copy of the tensor on every run.
   */
  output(value: string, name: string, type: ElemType, dims: Dim[]): void {
    const producer = this.nodes.find((n) => n.output?.includes(value));
    if (producer && !this.outputs.some((o) => o.name === value)) {
      for (const n of this.nodes) {
        n.output = n.output!.map((o) => (o === value ? name : o));
        n.input = n.input!.map((i) => (i === value ? name : i));
      }
      this.renamed.set(value, name);
    } else {
      this.nodes.push({ opType: 'Identity', input: [value], output: [name], name: `${name}.identity` });
    }
    this.outputs.push(valueInfo(name, type, dims));
  }

  /** A named initializer; adding the same name twice keeps one copy (a weight used by two nodes). */
  weight(name: string, data: Float32Array, dims: number[]): string {
    if (this.weightNames.has(name)) return name;
    this.weightNames.add(name);
    this.initializers.push(floatTensor(name, data, dims));
    return name;
  }

  floatConst(values: number[] | Float32Array, dims: number[] = []): string {
    const name = `const.${this.counter++}`;
    this.initializers.push(floatTensor(name, Float32Array.from(values), dims));
    return name;
  }

  intConst(values: number[], dims: number[] = [values.length]): string {
    const name = `const.${this.counter++}`;
    const data = BigInt64Array.from(values.map((v) => BigInt(v)));
    this.initializers.push({ name, dims, dataType: ELEM_TYPES.int64, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  /** Add a node with one output and return that output's name. */
  op(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}): string {
    const out = `${opType.toLowerCase()}.${this.counter++}`;
    this.nodes.push({
      opType,
      input: inputs.map((i) => this.renamed.get(i) ?? i),
      output: [out],
      name: out,
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return out;
  }

  /** Add a node with several outputs (Split) and return their names. */
  ops(opType: string, inputs: string[], outputs: number, attrs: Record<string, AttrValue> = {}): string[] {
    const name = `${opType.toLowerCase()}.${this.counter++}`;
    const out = Array.from({ length: outputs }, (_, i) => `${name}.${i}`);
    this.nodes.push({
      opType,
      input: inputs.map((i) => this.renamed.get(i) ?? i),
      output: out,
      name,
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return out;
  }

  /** Serialized ModelProto (IR 8, default opset 17). */
  encode(docString: string): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: 'strata-train-model',
      producerVersion: '1',
      docString,
      opsetImport: [{ domain: '', version: 17 }],
      graph: { name: this.name, node: this.nodes, initializer: this.initializers, input: this.inputs, output: this.outputs },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

function floatTensor(name: string, data: Float32Array, dims: number[]): TensorProto {
  const copy = Float32Array.from(data);
  return { name, dims, dataType: ELEM_TYPES.float, rawData: new Uint8Array(copy.buffer) };
}

function valueInfo(name: string, type: ElemType, dims: Dim[]): ValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: ELEM_TYPES[type],
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function attribute(name: string, value: AttrValue): AttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof value === 'number') return { name, type: T.INT, i: value };
  if (typeof value === 'string') return { name, type: T.STRING, s: new TextEncoder().encode(value) };
  if (Array.isArray(value)) return { name, type: T.INTS, ints: value };
  if ('float' in value) return { name, type: T.FLOAT, f: value.float };
  return { name, type: T.TENSOR, t: value.tensor };
}

/** A one-element float tensor, for attributes such as ConstantOfShape's value. */
export function scalarFloatTensor(value: number): TensorProto {
  return floatTensor('value', Float32Array.of(value), [1]);
}
