import fs from 'node:fs';
const a = JSON.parse(fs.readFileSync('/tmp/old-openapi.json')), b = JSON.parse(fs.readFileSync('/tmp/new-openapi.json'));
// compare the set of required fields & property names per component and per response
function props(s, doc, depth=0) {
  if (!s || depth > 6) return s;
  if (s.$ref) return props(doc.components.schemas[s.$ref.split('/').pop()], doc, depth+1);
  if (s.anyOf) return { anyOf: s.anyOf.map(x => props(x, doc, depth+1)) };
  if (s.allOf) return { allOf: s.allOf.map(x => props(x, doc, depth+1)) };
  if (s.properties) return { req: [...(s.required??[])].sort().join(','), props: Object.fromEntries(Object.entries(s.properties).sort().map(([k,v]) => [k, props(v, doc, depth+1)])) };
  if (s.items) return { items: props(s.items, doc, depth+1) };
  return s.type ?? s.enum ?? '?';
}
for (const [path, ops] of Object.entries(a.paths)) for (const [m, op] of Object.entries(ops)) {
  if (!op.responses) continue;
  for (const [st, r] of Object.entries(op.responses)) {
    const sa = r.content && Object.values(r.content)[0].schema, sb = b.paths[path][m].responses[st]?.content && Object.values(b.paths[path][m].responses[st].content)[0].schema;
    const ja = JSON.stringify(props(sa, a)), jb = JSON.stringify(props(sb, b));
    if (ja !== jb) console.log(m, path, st, '\n  old', ja.slice(0, 600), '\n  new', jb.slice(0, 600));
  }
  const ra = op.requestBody && JSON.stringify(props(op.requestBody.content['application/json'].schema, a)), rb = b.paths[path][m].requestBody && JSON.stringify(props(b.paths[path][m].requestBody.content['application/json'].schema, b));
  if (ra !== rb) console.log('REQ', m, path, '\n  old', ra, '\n  new', rb);
}
