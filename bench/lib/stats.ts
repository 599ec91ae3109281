// Small helpers shared by the benches: medians, formatting, markdown tables.

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function fmtBytes(n: number): string {
  if (n >= 2 ** 20) return `${n / 2 ** 20} MiB`;
  if (n >= 2 ** 10) return `${n / 2 ** 10} KiB`;
  return `${n} B`;
}

export function fmtNum(x: number, digits = 0): string {
  return x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function markdownTable(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
