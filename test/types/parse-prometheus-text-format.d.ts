/** The parser ships no types: what the metrics tests use of it. */
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
