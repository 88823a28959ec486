/** Pages around the actions: the login form, the confirmation of an action, and errors. */
import { html } from 'hono/html';
import type { Described, Params } from '../actions.ts';

export function loginView(next: string, problem: string | null) {
  return html`<div class="login panel"><h1>Sign in to the dashboard</h1>
${problem ? html`<p class="notice error" role="alert">${problem}</p>` : ''}
<form method="post" action="/dashboard/login">
<label for="key">An API key with the <code>admin</code> scope</label>
<input id="key" name="key" type="password" autocomplete="off" required autofocus spellcheck="false">
<input type="hidden" name="next" value="${next}">
<button class="primary" type="submit">Sign in</button></form>
<p class="muted">The key is sent once, in this form's body; the session is a signed cookie for this path only, good for 12 hours.
<code>npm run keys:api -- ops admin</code> makes one.</p></div>`;
}

export function confirmView(action: string, fields: readonly string[], params: Params, d: Described, api: string) {
  return html`<h1>${d.title}?</h1>
<div class="panel"><p>${d.detail}</p>
<p>${d.call ? 'The API call that does the same:' : 'No single API call does this; through the API:'}</p>
<pre class="curl">${api}</pre>
<form method="post" action="/dashboard/actions/${action}" class="actions">
${fields.map((f) => (params[f] === undefined ? '' : html`<input type="hidden" name="${f}" value="${params[f]}">`))}
<button class="${d.danger ? 'danger' : 'primary'}" type="submit">Confirm</button> <a href="${d.back}">Cancel</a></form></div>`;
}

export function errorView(status: number, message: string) {
  return html`<h1>${status === 404 ? 'Not found' : status === 409 ? 'Not done' : status >= 500 ? 'Sluice could not answer' : 'Refused'}</h1>
<p class="notice error" role="alert">${message}</p><p><a href="/dashboard">Back to the queues</a></p>`;
}
