// phalanx console: refresh parts of a page in place, without reloading it.
//
// <div data-refresh="URL" data-every="MS">: its HTML is replaced by GET URL every MS.
// <div data-log="URL" data-every="MS">: its HTML is GET URL?task=..&stream=.. (the
//   values of the [data-log-param] selects): a <pre data-task> per task shown, each kept
//   scrolled to its end unless scrolled away from it; the words of its [data-label]
//   go to #log-state.
// An answer with "X-Phalanx-Final: 1" is the last (the job has ended); a 401 means the
// session ended, and the page is reloaded (to the login form). Nothing is fetched while
// the page is hidden.
"use strict";

const HEADERS = { "X-Phalanx-Refresh": "1" };

async function fetchPart(url) {
  const answer = await fetch(url, { headers: HEADERS, credentials: "same-origin" });
  if (answer.status === 401) {
    window.location.reload();
    return null;
  }
  return { text: await answer.text(), ok: answer.ok, final: answer.headers.get("X-Phalanx-Final") === "1" };
}

function logUrl(element) {
  const params = new URLSearchParams();
  document.querySelectorAll("[data-log-param]").forEach((select) => {
    params.set(select.dataset.logParam, select.value);
  });
  return element.dataset.log + "?" + params.toString();
}

async function refreshHtml(element) {
  const part = await fetchPart(element.dataset.refresh);
  if (part === null) return true;
  if (part.ok) element.innerHTML = part.text;
  return part.final;
}

const shownLogs = new WeakMap();

async function refreshLog(element) {
  const part = await fetchPart(logUrl(element));
  if (part === null) return true;
  const state = document.getElementById("log-state");
  if (!part.ok) {
    if (state) state.textContent = "the log could not be read; trying again";
    return false;
  }
  if (shownLogs.get(element) !== part.text) {
    // task -> scrollTop, for the boxes the reader scrolled away from their end (the
    // page's first content has not been scrolled yet: every box goes to its end)
    const away = new Map();
    if (shownLogs.has(element)) {
      element.querySelectorAll("pre[data-task]").forEach((pre) => {
        if (pre.scrollTop + pre.clientHeight < pre.scrollHeight - 4) away.set(pre.dataset.task, pre.scrollTop);
      });
    }
    element.innerHTML = part.text;
    shownLogs.set(element, part.text);
    element.querySelectorAll("pre[data-task]").forEach((pre) => {
      pre.scrollTop = away.has(pre.dataset.task) ? away.get(pre.dataset.task) : pre.scrollHeight;
    });
  }
  const body = element.querySelector("[data-label]");
  if (state) state.textContent = part.final ? "the job has ended" : body ? body.dataset.label : "following";
  return part.final;
}

function keepFresh(element, refresh) {
  const every = Number(element.dataset.every || 2000);
  let timer = null;
  const tick = async () => {
    timer = null;
    let final = false;
    if (!document.hidden) {
      try {
        final = await refresh(element);
      } catch (error) {
        // the server may be restarting: try again at the next tick
      }
    }
    if (!final) timer = setTimeout(tick, every);
  };
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer !== null) {
      clearTimeout(timer);
      tick();
    }
  });
  return tick;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach((element) => {
    const tick = keepFresh(element, refreshHtml);
    setTimeout(tick, Number(element.dataset.every || 2000));
  });
  document.querySelectorAll("[data-log]").forEach((element) => {
    const tick = keepFresh(element, refreshLog);
    tick();
    document.querySelectorAll("[data-log-param]").forEach((select) => {
      select.addEventListener("change", () => {
        element.textContent = "";
        shownLogs.delete(element);
        refreshLog(element);
      });
    });
  });
});
