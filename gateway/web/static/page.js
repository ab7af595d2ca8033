// Mirror browser client: the elements of index.html the modules work
// with, looked up once (modules run after the document is parsed).

import { $ } from './dom.js';

export const dom = {
  app: $('app'),
  list: $('chat-list'),
  listEmpty: $('chat-list-empty'),
  newChat: $('new-chat'),
  status: $('status'),
  title: $('chat-title'),
  chatState: $('chat-state'),
  context: $('context'),
  scroller: $('scroller'),
  messages: $('messages'),
  composer: $('composer'),
  input: $('input'),
  send: $('send'),
  stop: $('stop'),
  mode: $('mode'),
  menu: $('menu'),
  backdrop: $('backdrop'),
  toasts: $('toasts'),
  handoffsOpen: $('handoffs-open'),
  modelOpen: $('model-open'),
  memoryOpen: $('memory-open'),
  settingsOpen: $('settings-open'),
  panel: $('panel'),
  panelTitle: $('panel-title'),
  panelBody: $('panel-body'),
  panelBack: $('panel-back'),
  panelClose: $('panel-close'),
  commandHints: $('command-hints'),
};
