import { useEffect, useState } from "preact/hooks";
import { call } from "../../api";
import { Link } from "../../router";
import { ErrorNote } from "../../ui";
import type { AdminPageProps } from "../admin";
import { origins, type ConfigAnswer, type ConfigSetting } from "./host";
import "./host.css";

// Configuration, /admin/config: the startup configuration as GET
// /api/v1/config gives it (every setting with its value and where it came
// from; a secret setting's value is never given), grouped by the part of
// svc it configures, and the host policy settings fixed at startup. The
// API changes none of it: it is read at startup from the environment and
// the configuration file.

export function Config(_props: AdminPageProps) {
  const [cfg, setCfg] = useState<ConfigAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [filter, setFilter] = useState("");
  useEffect(() => {
    call<ConfigAnswer>("GET", "/config").then(setCfg).catch(setError);
  }, []);
  const q = filter.trim().toLowerCase();
  const shown = (cfg?.settings ?? []).filter((s) => !q || s.name.toLowerCase().includes(q) || s.env.toLowerCase().includes(q) || (s.value ?? "").toLowerCase().includes(q));
  const groups = new Map<string, ConfigSetting[]>();
  for (const s of shown) {
    const g = s.name.includes(".") ? s.name.slice(0, s.name.indexOf(".")) : "general";
    groups.set(g, [...(groups.get(g) ?? []), s]);
  }
  return (
    <div class="host config">
      <h1>Configuration</h1>
      <p class="lead">
        How this server was started. Each value comes from the environment, the configuration file or the default; change one there and restart the server. Secret values are never shown.
      </p>
      <ErrorNote error={error} />
      <div class="inline-form">
        <label for="config-filter">Find a setting</label>
        <input id="config-filter" name="config_filter" type="search" value={filter} onInput={(e) => setFilter((e.currentTarget as HTMLInputElement).value)} placeholder="name, variable or value" />
      </div>
      {cfg === null ? (
        <p class="placeholder tall" aria-busy="true">
          Reading the configuration…
        </p>
      ) : (
        <>
          {groups.size === 0 && <p class="empty-state small">No setting matches “{filter}”. Clear the search to see every setting.</p>}
          {[...groups.entries()].map(([g, list]) => (
            <section key={g} class="block" aria-labelledby={"cfg-" + g} data-group={g}>
              <h2 id={"cfg-" + g}>{g}</h2>
              <table class="list settings" data-table="config">
                <caption class="visually-hidden">Settings of {g}</caption>
                <thead>
                  <tr>
                    <th scope="col">Setting</th>
                    <th scope="col">Value</th>
                    <th scope="col">From</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((s) => (
                    <tr key={s.name} data-setting={s.name}>
                      <th scope="row">
                        <code>{s.name}</code>
                        <span class="env">{s.env}</span>
                      </th>
                      <td class="value">{s.secret ? <span class="muted">secret, not shown</span> : s.value ? <code>{s.value}</code> : <span class="muted">empty</span>}</td>
                      <td>
                        <span class={"pill " + (s.origin === "default" ? "pill-plain" : "pill-ok")}>{origins[s.origin] ?? s.origin}</span>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </section>
          ))}
          <section class="block" aria-labelledby="cfg-policy">
            <h2 id="cfg-policy">Host policy fixed at startup</h2>
            {cfg.policy_fixed.length === 0 ? (
              <p class="muted">
                No policy setting is fixed: every one is changed on the <Link href="/admin/policy">host policy</Link> page. SVC_POLICY_&lt;NAME&gt; or the file’s policy section fixes one.
              </p>
            ) : (
              <table class="list settings" data-table="policy-fixed">
                <caption class="visually-hidden">Policy settings fixed at startup</caption>
                <thead>
                  <tr>
                    <th scope="col">Setting</th>
                    <th scope="col">Value</th>
                    <th scope="col">From</th>
                  </tr>
                </thead>
                <tbody>
                  {cfg.policy_fixed.map((f) => (
                    <tr key={f.name} data-setting={f.name}>
                      <th scope="row">
                        <code>{f.name}</code>
                      </th>
                      <td class="value">
                        <code>{JSON.stringify(f.value)}</code>
                      </td>
                      <td>
                        <span class="pill pill-ok">{origins[f.origin] ?? f.origin}</span>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
        </>
      )}
    </div>
  );
}
