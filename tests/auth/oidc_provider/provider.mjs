// The OpenID Connect provider forgeml's OIDC tests sign in against: panva's oidc-provider
// (OpenID Certified), on 127.0.0.1, with the clients and users of a JSON file and a login and
// consent form of its own (the package's devInteractions accept any password).
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {"clients": [oidc-provider client metadata...],
//          "users": {"alice": {"password": "...", "email": "...", "name": "...", "groups": [...]}}}
// Prints one line, `issuer http://127.0.0.1:PORT`, once it answers; stops on SIGTERM.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const users = config.users;

const html = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${html(title)}</title></head>`
    + `<body><h1>${html(title)}</h1>${body}</body></html>`;
}

async function findAccount(ctx, id) {
  const user = users[id];
  if (!user) return undefined;
  return {
    accountId: id,
    async claims() {
      return {
        sub: id, email: user.email, email_verified: true, name: user.name, groups: user.groups,
      };
    },
  };
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(body);
}

async function showInteraction(provider, req, res) {
  const { uid, prompt, params } = await provider.interactionDetails(req, res);
  if (prompt.name === 'login') {
    send(res, 200, page('Sign in', `<form method="post" action="/interaction/${uid}/login">`
      + '<input name="login"><input name="password" type="password">'
      + '<button type="submit">Sign in</button></form>'));
  } else {
    send(res, 200, page(`Authorize ${params.client_id}`,
      `<form method="post" action="/interaction/${uid}/consent">`
      + '<button type="submit">Allow</button></form>'));
  }
}

async function login(provider, req, res) {
  const form = await readForm(req);
  const user = users[form.get('login')];
  if (!user || user.password !== form.get('password')) {
    const { uid } = await provider.interactionDetails(req, res);
    send(res, 401, page('Sign in', `<p>Wrong login or password.</p>`
      + `<form method="post" action="/interaction/${uid}/login">`
      + '<input name="login"><input name="password" type="password"></form>'));
    return;
  }
  await provider.interactionFinished(req, res, { login: { accountId: form.get('login') } },
    { mergeWithLastSubmission: false });
}

async function consent(provider, req, res) {
  await readForm(req);
  const { prompt: { details }, grantId, session, params } = await provider.interactionDetails(req, res);
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  const result = { consent: { grantId: await grant.save() } };
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const provider = new Provider(issuer, {
    clients: config.clients,
    findAccount,
    claims: {
      openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'],
    },
    // the ID token carries the claims its scopes grant (forgeml reads groups from it)
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' }] },
  });
  const handle = provider.callback();
  server.on('request', async (req, res) => {
    const match = req.url.match(/^\/interaction\/([\w-]+)(\/login|\/consent)?$/);
    if (!match) {
      handle(req, res);
      return;
    }
    try {
      if (req.method === 'GET' && !match[2]) await showInteraction(provider, req, res);
      else if (req.method === 'POST' && match[2] === '/login') await login(provider, req, res);
      else if (req.method === 'POST' && match[2] === '/consent') await consent(provider, req, res);
      else send(res, 405, page('Method not allowed', ''));
    } catch (error) {
      send(res, 400, page('Interaction failed', html(error.message)));
    }
  });
  process.stdout.write(`issuer ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
